//! The stage payloads that are no resource: a Helm stage's values file and an upload stage's
//! files, with their manifest entries. Both the CloudFormation path and the Terraform module
//! deploy them.

use super::{Backend, BackendInput, BackendOutput};
use crate::app::stage::ChartSource;
use crate::app::{StageId, StageKind};
use crate::assembly::manifest::{
    Artifact, ArtifactFormat, Chart, SetFromOutput, StageManifest, StageOutput,
};
use crate::diagnostics::Diagnostics;

/// Helm values and uploaded files.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StagePayloads;

impl Backend for StagePayloads {
    fn synth_stack(
        &self,
        input: &BackendInput<'_>,
        _ds: &mut Diagnostics,
    ) -> Result<BackendOutput, Diagnostics> {
        let stack = input.stack;
        let mut out = BackendOutput::default();
        for (index, stage) in stack.stages().iter().enumerate() {
            let base = input.stage_base(index);
            let name = stage.name.clone();
            let entry = match &stage.kind {
                StageKind::Helm(release) => {
                    let path = format!("{base}.values.yaml");
                    let mut text = String::new();
                    for line in release.note.lines() {
                        text.push_str(&format!("# {line}\n"));
                    }
                    let mut values = release.values.clone();
                    if let (Some(key), serde_json::Value::Object(map)) =
                        (&release.tags_value, &mut values)
                    {
                        // The stack's tags, then any the release states (which win).
                        let mut tags: serde_json::Map<String, serde_json::Value> = input
                            .tags
                            .iter()
                            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                            .collect();
                        if let Some(serde_json::Value::Object(own)) = map.get(key) {
                            tags.extend(own.clone());
                        }
                        map.insert(key.clone(), serde_json::Value::Object(tags));
                    }
                    crate::synth::serializing(|| crate::yaml::push(&mut text, &values));
                    out.files.push((path.clone(), text.into_bytes()));
                    let chart = match &release.chart {
                        ChartSource::Repository {
                            repo,
                            chart,
                            version,
                        } => Chart::Repository {
                            repository: repo.clone(),
                            name: chart.clone(),
                            version: version.clone(),
                        },
                        ChartSource::Git { url, commit, path } => Chart::Git {
                            url: url.clone(),
                            commit: commit.clone(),
                            path: path.clone(),
                        },
                    };
                    let set_from_outputs = release
                        .set_from_outputs
                        .iter()
                        .map(|(key, r)| SetFromOutput {
                            key: key.clone(),
                            stage: stack
                                .stage_of(r.construct_id())
                                .and_then(|s| stack.stage(s))
                                .map(|s| s.name.clone()),
                            output: r.output_key(),
                        })
                        .collect();
                    StageManifest::Helm {
                        name,
                        release: release.release.clone(),
                        namespace: release.namespace.clone(),
                        chart,
                        set_from_outputs,
                        wait: release.wait,
                        steps: Vec::new(),
                        artifacts: vec![Artifact::new(ArtifactFormat::HelmValues, path)],
                    }
                }
                StageKind::Upload(upload) => {
                    let bucket_stage = stack
                        .stage_of(upload.bucket.name().construct_id())
                        .and_then(|s| stack.stage(s))
                        .map(|s| s.name.clone());
                    let mut artifacts = Vec::new();
                    for file in &upload.files {
                        let path = format!("{base}/{}", file.name);
                        out.files
                            .push((path.clone(), file.content.clone().into_bytes()));
                        artifacts.push(Artifact::new(ArtifactFormat::Script, path));
                    }
                    StageManifest::S3Upload {
                        name,
                        bucket: StageOutput {
                            stage: bucket_stage,
                            output: upload.bucket.name().output_key(),
                        },
                        prefix: upload.prefix.clone(),
                        steps: Vec::new(),
                        artifacts,
                    }
                }
                StageKind::CloudFormation | StageKind::Kubernetes => continue,
            };
            out.stages.insert(StageId::from_index(index), entry);
        }
        Ok(out)
    }
}
