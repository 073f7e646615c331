//! The generated runbooks refer only to what the assembly holds: every artifact path and every
//! CloudFormation stack name they mention exists, and they say how to reach the model.

use crate::common::stage_file;
use crate::reference;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// Tokens that look like assembly paths (`<stack>/...`) or stage stack names (`<stack>-...`).
fn mentions<'a>(text: &'a str, stack: &str) -> (BTreeSet<&'a str>, BTreeSet<&'a str>) {
    let mut paths = BTreeSet::new();
    let mut names = BTreeSet::new();
    for token in text.split(|c: char| c.is_whitespace() || "`\"'(),=".contains(c)) {
        let token = token.trim_end_matches(['.', ':', ';']);
        if token.starts_with(&format!("{stack}/")) {
            paths.insert(token);
        } else if let Some(rest) = token.strip_prefix(&format!("{stack}-")) {
            // Another stack's name sharing the prefix (kimi-k3-eks-karpenter) is not ours.
            if !rest.is_empty() && !rest.contains('/') {
                names.insert(token);
            }
        }
    }
    (paths, names)
}

#[test]
fn runbooks_mention_only_what_exists() {
    for app in reference::all().into_iter().chain(reference::variants()) {
        let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
        for stack in &assembly.manifest().stacks {
            let name = stack.name.as_str();
            let runbook_path = format!("{name}/RUNBOOK.md");
            assert_eq!(
                stack.runbook.as_ref().map(|r| r.artifacts[0].path.as_str()),
                Some(runbook_path.as_str())
            );
            let text = assembly.text(&runbook_path).expect("runbook written");
            let stack_names: BTreeSet<&str> =
                stack.stages.iter().filter_map(|s| s.stack_name()).collect();
            let (paths, names) = mentions(text, name);
            assert!(!paths.is_empty() && !names.is_empty());
            for path in &paths {
                let is_dir = assembly
                    .files()
                    .keys()
                    .any(|f| f.starts_with(&format!("{path}/")));
                assert!(
                    assembly.file(path).is_some() || is_dir,
                    "{runbook_path} mentions `{path}`, which is not in the assembly"
                );
            }
            // The admin host's `Name` tag is the other name the runbook may use.
            let admin = stack.admin_host.as_ref().map(|a| a.name_tag.as_str());
            // Named node groups share the prefix too.
            let node_groups: BTreeSet<String> = stack
                .stages
                .iter()
                .filter(|s| s.stack_name().is_some())
                .filter_map(|s| {
                    serde_json::from_str::<Value>(assembly.text(&s.artifacts()[0].path)?).ok()
                })
                .flat_map(|t| {
                    t["Resources"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .filter_map(|(_, r)| {
                            r["Properties"]["NodegroupName"].as_str().map(str::to_owned)
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            for n in names.iter().filter(|n| !node_groups.contains(**n)) {
                assert!(
                    stack_names.contains(n) || Some(*n) == admin,
                    "{runbook_path} mentions stack `{n}`, not in the manifest"
                );
            }
            // Every stage's stack and artifact is covered.
            for n in &stack_names {
                assert!(text.contains(n), "{runbook_path} misses {n}");
            }
            for stage in &stack.stages {
                for a in stage.artifacts() {
                    let p = a.path.as_str();
                    assert!(text.contains(p), "{runbook_path} misses {p}");
                }
            }
            assert!(text.contains("\"model\":\"Kimi-K3\"") && text.contains("model=\"Kimi-K3\""));
            assert!(text.contains("8000") && text.contains("/v1/chat/completions"));
            // The references take an API key: the runbook creates its Secret and sends it.
            assert!(text.contains("/health") && text.contains("os.environ[\"VLLM_API_KEY\"]"));
            assert!(text.contains("-H \"Authorization: Bearer $VLLM_API_KEY\""));
            assert!(text.contains("kubectl create secret generic kimi-k3-api-key"));
            assert!(text.contains("Not refundable"));
            // Prometheus's own alert templates (`{{ $labels.pod }}`) are quoted as they are.
            assert!(
                !text.replace("{{ $", "").contains("{{") && !text.contains("&quot;"),
                "rendered, not escaped"
            );
        }
    }
}

/// The runbook is a function of the manifest alone: rendered again from `manifest.json` as read
/// back from its text, it is the `RUNBOOK.md` synthesis wrote, byte for byte.
#[test]
fn runbooks_are_rendered_from_the_manifest_alone() {
    for app in reference::all().into_iter().chain(reference::variants()) {
        let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
        let text = assembly.text("manifest.json").expect("manifest written");
        let manifest = hyperforge::assembly::manifest::Manifest::from_json(text).expect("parses");
        for stack in &manifest.stacks {
            let written = assembly
                .text(&format!("{}/RUNBOOK.md", stack.name))
                .expect("runbook written");
            let again = hyperforge::runbook::render(stack).expect("renders");
            assert!(
                again == written,
                "{}: the runbook differs when rendered from manifest.json",
                stack.name
            );
        }
    }
}

#[test]
fn runbook_commands_follow_the_capacity() {
    let hp = reference::kimi_k3_hyperpod().synth().unwrap();
    let text = hp.text("kimi-k3-hyperpod/RUNBOOK.md").unwrap();
    assert!(text.contains("aws sagemaker search-training-plan-offerings"));
    assert!(text.contains("aws sagemaker create-training-plan"));
    assert!(text.contains("aws sagemaker list-cluster-nodes"));
    assert!(text.contains("DeploymentComplete"));
    assert!(text.contains("kubectl get ingress -n default"));
    assert!(text.contains(
        "git -C ../sagemaker-hyperpod-cli checkout 011ca927123e02b35a399935bbb3ab1905fe33c7"
    ));
    // HyperPod: SageMaker quotas only; its instances use no EC2 vCPU quota.
    assert!(text.contains("for cluster usage` of at least 1"));
    assert!(!text.contains("vCPU per") && !text.contains("Running On-Demand"));
    // Priced in the stack's region, or said plainly that the catalog has no price there.
    assert!(text
        .contains("no on-demand price for `p6-b300.48xlarge` in\nus-west-2, this stack's region"));
    assert!(!text.contains("price of\n1 x `p6-b300.48xlarge` in us-east-1"));

    let eks = reference::kimi_k3_eks().synth().unwrap();
    let text = eks.text("kimi-k3-eks/RUNBOOK.md").unwrap();
    assert!(text.contains("aws ec2 describe-capacity-block-offerings"));
    assert!(text.contains("aws ec2 purchase-capacity-block"));
    // Streamed from the staged copy: (125 s load + 900 s warm-up) x 1.5 -> 1,560 s of startup
    // probe, and 900 s for scheduling and the image pull.
    assert!(text.contains("kubectl rollout status deployment/kimi-k3 -n kimi-k3 --timeout=2460s"));
    // The weights are staged first, and the runbook waits for the Job.
    let weights = stage_file(&eks, "kimi-k3-eks", "weights", "yaml");
    assert!(text.contains(&format!("kubectl apply -f {weights}")));
    assert!(text.contains("job=stage-kimi-k3-0123456789ab ns=model-weights"));
    assert!(text.contains("kubectl port-forward svc/kimi-k3 8000:8000 -n kimi-k3"));
    assert!(text.contains("--set \"vpcId=$(aws cloudformation describe-stacks"));
    assert!(text.contains("--repo https://nvidia.github.io/k8s-device-plugin --version 0.18.2"));
    assert!(text.contains("terraform -chdir=kimi-k3-eks/terraform/01-foundation apply"));
    // The Helm phase applies through the admin tunnel, after the phase that creates it.
    let foundation = text
        .find("terraform -chdir=kimi-k3-eks/terraform/01-foundation apply")
        .unwrap();
    let helm = text
        .find("terraform -chdir=kimi-k3-eks/terraform/03-nvidia-device-plugin apply")
        .unwrap();
    assert!(foundation < helm);
    assert!(text.contains("--document-name AWS-StartPortForwardingSessionToRemoteHost"));
    assert!(text.contains("--tls-server-name \"${ENDPOINT#https://}\""));
    assert!(text.contains("of at least 192 vCPUs (192 vCPU per `p6-b300.48xlarge`)"));

    // Cleanup runs in reverse: the workload goes before the node groups' stack.
    let workload = text
        .rfind(&format!(
            "kubectl delete -f {}",
            stage_file(&eks, "kimi-k3-eks", "workload", "yaml")
        ))
        .unwrap();
    let nodes = text
        .rfind("delete-stack --region us-west-2 --stack-name kimi-k3-eks-nodes")
        .unwrap();
    assert!(workload < nodes);

    // Karpenter: the reservation id written into the EC2NodeClass is the pool's input, put in
    // place as the stage is applied; no text is rewritten.
    let karpenter = reference::kimi_k3_eks_karpenter().synth().unwrap();
    let text = karpenter.text("kimi-k3-eks-karpenter/RUNBOOK.md").unwrap();
    let manifest = karpenter
        .text("kimi-k3-eks-karpenter/06-gpu-capacity.yaml")
        .unwrap();
    assert!(manifest.contains("id: cr-0123456789abcdef0"));
    assert!(text.contains("export GPU_POOL_CAPACITY_RESERVATION_ID=cr-0123456789abcdef0\n"));
    assert!(text.contains("hyperforge fill --out . kimi-k3-eks-karpenter gpu-capacity \\\n  --value GPU_POOL_CAPACITY_RESERVATION_ID=\"$GPU_POOL_CAPACITY_RESERVATION_ID\" | kubectl apply -f -"));
    assert!(!text.contains("sed "));
    assert!(!text.contains("kubectl apply -f kimi-k3-eks-karpenter/06-gpu-capacity.yaml"));
    assert!(!text.contains("pass your reservation id and zone id as the\nparameter overrides"));
}

/// Every bucket of every CloudFormation stage is emptied of all object versions and delete
/// markers before its stack is deleted (CloudFormation deletes only empty buckets), by the
/// stack output that names it; Terraform empties on destroy only the bucket whose objects
/// nothing in the deployment wrote (the inference operator's certificates).
#[test]
fn every_bucket_is_emptied_before_its_stack_is_deleted() {
    for app in reference::all().into_iter().chain(reference::variants()) {
        let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
        for stack in &assembly.manifest().stacks {
            let text = assembly
                .text(&format!("{}/RUNBOOK.md", stack.name))
                .unwrap();
            let cleanup = &text[text.find("## 5. Cleanup").expect("a cleanup section")..];
            for stage in &stack.stages {
                let Some(stack_name) = stage.stack_name() else {
                    continue;
                };
                let template: Value =
                    serde_json::from_str(assembly.text(&stage.artifacts()[0].path).unwrap())
                        .unwrap();
                let buckets: Vec<&String> = template["Resources"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .filter(|(_, r)| r["Type"] == "AWS::S3::Bucket")
                    .map(|(id, _)| id)
                    .collect();
                let delete = cleanup
                    .find(&format!(
                        "delete-stack --region us-west-2 --stack-name {stack_name}\n"
                    ))
                    .unwrap_or_else(|| panic!("{stack_name} is never deleted"));
                let section_start = cleanup[..delete].rfind("### Stage").unwrap();
                let section = &cleanup[section_start..delete];
                for bucket in buckets {
                    let output = template["Outputs"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .find(|(k, o)| {
                            !k.starts_with("Export") && o["Value"] == json!({"Ref": bucket})
                        })
                        .map(|(k, _)| k.clone())
                        .unwrap_or_else(|| panic!("{stack_name}: no output names bucket {bucket}"));
                    let reads = format!("--stack-name {stack_name} \\\n  --query \"Stacks[0].Outputs[?OutputKey=='{output}'].OutputValue\"");
                    assert!(section.contains(&reads), "{stack_name}: {bucket} is not read before the stack is deleted:\n{section}");
                    for needed in [
                        "# step: empty-versioned-bucket",
                        "put-bucket-logging",
                        "for kind in Versions DeleteMarkers",
                        "list-object-versions",
                        "delete-objects",
                        "VersionId: VersionId",
                    ] {
                        assert!(
                            section.contains(needed),
                            "{stack_name}: emptying {bucket} lacks `{needed}`"
                        );
                    }
                    assert!(
                        !section.contains("console"),
                        "exact commands, not the console"
                    );
                }
            }
            // Terraform: force_destroy on the operator's bucket only.
            let Some(tf) = stack.terraform.as_ref() else {
                continue;
            };
            for a in &tf.artifacts {
                let module: Value = serde_json::from_str(assembly.text(&a.path).unwrap()).unwrap();
                for (name, body) in module["resource"]["aws_s3_bucket"]
                    .as_object()
                    .into_iter()
                    .flatten()
                {
                    let forced = body.get("force_destroy") == Some(&json!(true));
                    assert_eq!(
                        forced,
                        name == "inference_operator_tls_bucket",
                        "{name}: {body}"
                    );
                }
            }
        }
    }
}
