//! The runbook: one `RUNBOOK.md` per stack, the human instructions for deploying what the
//! assembly holds. Built from the stack's manifest entry alone (its stages, steps, inputs and
//! inventory) into a plain [`RunbookData`] value, then laid out by a Handlebars template (`runbook.md.hbs`, strict mode, no HTML
//! escaping). The template only formats text; every value (paths, stack names, parameters,
//! request bodies) is computed here.

use crate::assembly::inventory::{
    AlertEntry, CapacityEndEntry, CapacityEntry, CapacitySourceEntry, EndpointEntry, LaunchedBy,
    ReachedThrough, SecretKeyEntry, StagingEntry,
};
use crate::assembly::manifest::ValueSource;
use crate::assembly::manifest::{
    Artifact, Chart, StackManifest, StageManifest, StageOutput, Step, When,
};
use crate::assembly::plan::{sh_quote, variable_of};
use crate::catalog;
use handlebars::Handlebars;
use serde::Serialize;
use std::sync::OnceLock;

mod fleet;

pub use fleet::{fleet_data, render_fleet, FleetData, FLEET_RUNBOOK_MEMBERS};

/// The template, compiled once per process.
const TEMPLATE: &str = include_str!("runbook.md.hbs");

/// The fleet's template (`FLEET.md`).
const FLEET_TEMPLATE: &str = include_str!("fleet.md.hbs");

/// Introduces a partial in the template file: `{{!-- template: NAME --}}` on its own line.
const PARTIAL_MARKER: &str = "{{!-- template: ";

/// Why a runbook could not be rendered (a bug: the template and the data are both ours).
#[derive(Debug, thiserror::Error)]
#[error("cannot render the runbook: {0}")]
pub struct RunbookError(String);

/// Everything the template shows, as plain values.
#[derive(Clone, Debug, Serialize)]
pub struct RunbookData {
    /// Stack name.
    pub stack: String,
    /// Region.
    pub region: String,
    /// The stack's description, or empty.
    pub description: String,
    /// The EKS cluster's name, or empty.
    pub eks_cluster: String,
    /// The EKS cluster's Kubernetes version, or empty.
    pub kubernetes_version: String,
    /// The existing cluster the stack deploys onto, and what it must have (none or one).
    pub imported_cluster: Vec<ImportedClusterData>,
    /// Whether the stack runs a HyperPod cluster.
    pub hyperpod: bool,
    /// The HyperPod cluster's name, or empty.
    pub hyperpod_cluster: String,
    /// The values chosen when the stack is deployed.
    pub inputs: Vec<InputData>,
    /// Whether a Kubernetes stage carries values only a deployment knows (`hyperforge fill`).
    pub needs_fill: bool,
    /// The GPU capacity.
    pub capacity: Vec<CapacityData>,
    /// Stages in deployment order.
    pub stages: Vec<StageData>,
    /// Stages in reverse order, for cleanup.
    pub cleanup: Vec<StageData>,
    /// The Terraform root module, when there is one.
    pub terraform: Vec<TerraformData>,
    /// The served endpoints.
    pub endpoints: Vec<EndpointData>,
    /// The admin host reaching the private API endpoint, if the stack has one.
    pub admin_host: Vec<AdminHostData>,
    /// The Prometheus alerting rules the stack deploys.
    pub alerts: Vec<AlertEntry>,
    /// Whether a step checks an image (`docker buildx`).
    pub needs_docker: bool,
    /// Whether a step checks a Hub revision (`curl`, `python3`).
    pub needs_curl: bool,
}

/// The admin host and the local end of the Session Manager tunnel through it.
#[derive(Clone, Debug, Serialize)]
pub struct AdminHostData {
    /// The instance's `Name` tag.
    pub name_tag: String,
    /// The tunnel's local port.
    pub local_port: u16,
    /// The EKS cluster's name.
    pub cluster: String,
    /// Region.
    pub region: String,
}

/// One group of GPU instances and where they come from.
#[derive(Clone, Debug, Serialize)]
pub struct CapacityData {
    /// Construct path.
    pub path: String,
    /// EC2 instance type (`p6-b300.48xlarge`).
    pub instance_type: String,
    /// The type as deployed (`ml.p6-b300.48xlarge` on HyperPod).
    pub deployed_type: String,
    /// Instances.
    pub count: i64,
    /// vCPUs per instance.
    pub vcpus: u32,
    /// vCPUs of all instances.
    pub total_vcpus: i64,
    /// The EC2 on-demand quota family letter (`P`, `G`).
    pub family: String,
    /// On-demand price of all instances in the stack's region, or empty when the catalog has
    /// none there.
    pub on_demand_per_hour: String,
    /// When the stack's region is not priced: the price in the region the catalog holds
    /// (us-east-1), for reference only; else empty.
    pub reference_per_hour: String,
    /// Whether SageMaker HyperPod launches the instances (its own quotas, no EC2 vCPU quota).
    pub hyperpod: bool,
    /// Whether a Karpenter pool selects the block by tags rather than by id.
    pub selected_by_tags: bool,
    /// Capacity from a training plan.
    pub training_plan: bool,
    /// Whether the instances come from an On-Demand Capacity Reservation.
    pub capacity_reservation: bool,
    /// Capacity from an EC2 Capacity Block.
    pub capacity_block: bool,
    /// The training plan ARN or reservation id the description uses.
    pub reservation: String,
    /// Its zone id, or empty.
    pub zone_id: String,
    /// Whether a Karpenter pool launches the instances (on demand, up to `count`).
    pub pool: bool,
    /// The block's timeline, when its window was given.
    pub timeline: Option<TimelineData>,
}

/// One deployment stage.
#[derive(Clone, Debug, Serialize)]
pub struct StageData {
    /// 1-based position.
    pub number: usize,
    /// Stage name.
    pub name: String,
    /// Manifest kind.
    pub kind: String,
    /// Region (repeated for the template).
    pub region: String,
    /// Whether this is the first stage that talks to the cluster (kubeconfig first).
    pub first_cluster_access: bool,
    /// EKS cluster name (repeated for the template).
    pub eks_cluster: String,
    /// CloudFormation stage, if it is one.
    pub cloudformation: Vec<CloudFormationStage>,
    /// Upload stage, if it is one.
    pub upload: Vec<UploadStage>,
    /// Helm stage, if it is one.
    pub helm: Vec<HelmStage>,
    /// Kubernetes stage, if it is one.
    pub kubernetes: Vec<KubernetesStage>,
    /// The stage's steps before it is applied (CloudFormation path).
    pub before: Vec<StepData>,
    /// The stage's steps after it is applied (CloudFormation path).
    pub after: Vec<StepData>,
    /// The stage's steps before what it created is deleted (CloudFormation path).
    pub before_delete: Vec<StepData>,
}

/// One operational step of the plan, rendered for one path.
#[derive(Clone, Debug, Serialize)]
pub struct StepData {
    /// What it does, for people.
    pub summary: String,
    /// The lines binding the deploy-time values it reads, for this path.
    pub reads: Vec<String>,
    /// The script (its marker first).
    pub script: String,
}

/// A CloudFormation stage.
#[derive(Clone, Debug, Serialize)]
pub struct CloudFormationStage {
    /// The CloudFormation stack name.
    pub stack_name: String,
    /// The template path, relative to the assembly root.
    pub template: String,
    /// Capabilities, space-separated.
    pub capabilities: String,
    /// `K=V` overrides, space-separated, or empty.
    pub parameter_overrides: String,
    /// Parameters and what they mean.
    pub parameters: Vec<ParameterData>,
    /// Whether the stage creates the HyperPod cluster (wait for its nodes).
    pub creates_hyperpod: bool,
    /// GPU instance types of node groups in this stage (wait for the nodes).
    pub gpu_node_types: Vec<String>,
    /// Whether the template is deployed from S3 (over the inline limit).
    pub deploy_from_s3: bool,
    /// Warnings this stage schedules before reserved capacity ends.
    pub capacity_ends: Vec<CapacityEndData>,
}

/// A warning before reserved capacity ends.
#[derive(Clone, Debug, Serialize)]
pub struct CapacityEndData {
    /// The Capacity Block's reservation id, or empty.
    pub reservation_id: String,
    /// The shell variable of the stack's input holding the reservation id, or empty.
    pub reservation_variable: String,
    /// The training plan's ARN, or empty.
    pub training_plan_arn: String,
    /// The shell variable of the stack's input holding the plan's ARN, or empty.
    pub training_plan_variable: String,
    /// The plan's name as the shell takes it from that variable (the ARN's last part).
    pub training_plan_name_from_variable: String,
    /// The training plan's name (the ARN's last part), or empty.
    pub training_plan_name: String,
    /// When it ends.
    pub end_time: String,
    /// Hours before the end the warning is sent.
    pub lead_hours: u32,
}

/// One template parameter.
#[derive(Clone, Debug, Serialize)]
pub struct ParameterData {
    /// Name.
    pub name: String,
    /// Default (the validated value of the description).
    pub default: String,
}

/// An S3 upload stage.
#[derive(Clone, Debug, Serialize)]
pub struct UploadStage {
    /// The CloudFormation stack with the bucket output.
    pub bucket_stack: String,
    /// The output naming the bucket.
    pub bucket_output: String,
    /// Key prefix.
    pub prefix: String,
    /// The files, relative to the assembly root.
    pub files: Vec<String>,
}

/// A Helm stage.
#[derive(Clone, Debug, Serialize)]
pub struct HelmStage {
    /// Release name.
    pub release: String,
    /// Namespace.
    pub namespace: String,
    /// Whether Helm creates the namespace (every one but `kube-system`).
    pub create_namespace: bool,
    /// Values file, relative to the assembly root.
    pub values: String,
    /// A chart from a git repository, if so.
    pub git: Vec<GitChart>,
    /// A chart from a Helm repository (HTTP), if so.
    pub repository: Vec<RepositoryChart>,
    /// A chart from an OCI registry, if so.
    pub oci: Vec<RepositoryChart>,
    /// `--set` values read from CloudFormation outputs.
    pub sets: Vec<SetFromOutput>,
    /// Whether the install waits for the release's workloads (`--wait`).
    pub wait: bool,
}

/// A chart in a git repository.
#[derive(Clone, Debug, Serialize)]
pub struct GitChart {
    /// Clone URL.
    pub url: String,
    /// Pinned commit.
    pub commit: String,
    /// Directory to clone into (next to the assembly).
    pub checkout: String,
    /// Chart directory inside the checkout.
    pub path: String,
}

/// A chart in a Helm repository or OCI registry.
#[derive(Clone, Debug, Serialize)]
pub struct RepositoryChart {
    /// Repository URL.
    pub repository: String,
    /// Chart name.
    pub name: String,
    /// Pinned version.
    pub version: String,
}

/// A `--set key=<output>` value.
#[derive(Clone, Debug, Serialize)]
pub struct SetFromOutput {
    /// Values key.
    pub key: String,
    /// CloudFormation stack holding the output.
    pub stack_name: String,
    /// Output name.
    pub output: String,
}

/// A Kubernetes stage.
#[derive(Clone, Debug, Serialize)]
pub struct KubernetesStage {
    /// The manifest, relative to the assembly root.
    pub manifest: String,
    /// Inference endpoints applied here.
    pub endpoints: Vec<EndpointData>,
    /// Karpenter node pools applied here.
    pub node_pools: Vec<String>,
    /// The command applying the manifest (`hyperforge fill` putting in the values only a
    /// deployment knows, when it carries any).
    pub apply: String,
    /// Model weights the stage's Jobs stage into a store.
    pub stagings: Vec<StagingData>,
    /// Values only a deployment knows, read from outputs (or set with the inputs) before the
    /// apply command puts them in place of their placeholders.
    pub values: Vec<DeployValueData>,
    /// Grafana dashboards the stage ships (their ConfigMaps in kube-system).
    pub dashboards: Vec<String>,
}

/// A deploy-time value of a Kubernetes stage.
#[derive(Clone, Debug, Serialize)]
pub struct DeployValueData {
    /// The shell variable holding it.
    pub variable: String,
    /// The command reading it from its CloudFormation stack's outputs; empty for an input
    /// (set with the stack's inputs, section 1).
    pub read: String,
    /// The producing CloudFormation stage; empty for an input.
    pub stage: String,
    /// The output's name (Terraform: its snake case); empty for an input.
    pub output: String,
}

/// A deploy-time input of the stack.
#[derive(Clone, Debug, Serialize)]
pub struct InputData {
    /// The CloudFormation parameter's name.
    pub name: String,
    /// The shell variable holding it.
    pub variable: String,
    /// The Terraform variable (`TF_VAR_` plus it is the environment variable Terraform reads).
    pub terraform_variable: String,
    /// The value the description was synthesized with, or `<...>` when there is none.
    pub default: String,
    /// What it is.
    pub description: String,
    /// What a valid value is.
    pub expected: String,
    /// The stages using it.
    pub stages: String,
}

/// The command applying Kubernetes stage `entry` of `manifest` with `values` put in place of
/// their placeholders by `hyperforge fill`, each from its shell variable.
fn fill_command(
    manifest: &StackManifest,
    entry: &StageManifest,
    values: &[DeployValueData],
) -> String {
    let mut out = format!(
        "hyperforge fill --out . {} {}",
        sh_quote(&manifest.name),
        sh_quote(entry.name())
    );
    for v in values {
        out.push_str(&format!(
            " \\\n  --value {}=\"${}\"",
            v.variable, v.variable
        ));
    }
    out.push_str(" | kubectl apply -f -");
    out
}

/// A Job staging model weights.
#[derive(Clone, Debug, Serialize)]
pub struct StagingData {
    /// The model.
    pub model_id: String,
    /// What sets the copy's time (`the Hub's 500 MB/s`).
    pub limit: String,
    /// Its revision.
    pub revision: String,
    /// Where the copy goes (`s3://bucket/model/revision/`).
    pub url: String,
    /// The staging manifest's key (`s3://bucket/model/revision.manifest.json`).
    pub manifest_url: String,
    /// The Job and its namespace.
    pub job: String,
    /// Its namespace.
    pub namespace: String,
    /// The image it runs.
    pub image: String,
    /// Estimated minutes (from the Hub's rate), or empty when the size is unknown.
    pub minutes: String,
    /// The copy's size, GiB (one decimal), or empty.
    pub size_gib: String,
    /// S3 Standard storage per month in the stack's region, USD, or empty when unpriced.
    pub storage_usd_per_month: String,
    /// The Secret the Job reads the Hub token from, or empty.
    pub token_secret: String,
    /// Its key.
    pub token_key: String,
    /// The shell variable holding the bucket's name when the deployment resolves it (the
    /// stage's commands read it from `bucket_output`), or empty.
    pub bucket_variable: String,
    /// The stage output it is read from, or empty.
    pub bucket_output: String,
}

/// One served model endpoint.
#[derive(Clone, Debug, Serialize)]
pub struct EndpointData {
    /// Object name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Hugging Face model id.
    pub model_id: String,
    /// Served model name (`model` in requests).
    pub served_model_name: String,
    /// The pinned commit of the model repository, or empty.
    pub revision: String,
    /// Whether the server runs the repository's own code.
    pub remote_code: bool,
    /// The image reference the container runs.
    pub image: String,
    /// The image as given (its tag, for readers), when pinned by `image_digest`; else empty.
    pub image_tag: String,
    /// The digest the image is pinned to, or empty.
    pub image_digest: String,
    /// The engine release the pod checks at start-up (`0.27.0`), or empty.
    pub engine_release: String,
    /// The Secret the server reads the Hugging Face token from, or empty.
    pub hf_token_secret: String,
    /// The key inside that Secret.
    pub hf_token_key: String,
    /// The Secret holding the API key, or empty when the endpoint takes none.
    pub api_key_secret: String,
    /// The key inside that Secret.
    pub api_key_key: String,
    /// The kubectl JSONPath reading that key from the Secret.
    pub api_key_jsonpath: String,
    /// GPUs per replica (the tensor parallel group's size on one node).
    pub gpus: u32,
    /// The shared memory the EKS path mounts for that many GPUs, GiB.
    pub shm_gib: u64,
    /// Port.
    pub port: u16,
    /// Served by the HyperPod inference operator (`InferenceEndpointConfig`).
    pub operator: bool,
    /// Served by a Deployment behind a Service.
    pub deployment: bool,
    /// Served by a LeaderWorkerSet (a replica over several nodes) behind a Service.
    pub group: bool,
    /// Nodes each replica spans.
    pub nodes_per_replica: u32,
    /// The bandwidth gate's floor, GB/s (`40.0`), for a group; empty otherwise.
    pub fabric_floor_gbs: String,
    /// Startup budget in seconds (download, load, warm-up, times 1.5).
    pub startup_secs: u64,
    /// The server reads a staged copy from S3 rather than the Hub.
    pub staged: bool,
    /// Where the weights come from, for people (`S3, streamed into GPU memory`).
    pub weights_source: String,
    /// The catalog's cold-start estimate from node ready to serving, minutes, or empty.
    pub cold_start_minutes: String,
    /// The same in minutes.
    pub startup_minutes: u64,
    /// How long to wait for a Deployment's rollout: its progress deadline (the startup
    /// probe's allowance plus the margin for scheduling and the image pull).
    pub rollout_timeout_secs: u64,
    /// The Service is a load balancer (internal or internet-facing).
    pub load_balancer: bool,
    /// The load balancer is internal.
    pub internal: bool,
    /// Chat completion request body (JSON).
    pub request_body: String,
}

/// The Terraform root module.
#[derive(Clone, Debug, Serialize)]
pub struct TerraformData {
    /// The folder holding the root modules, relative to the assembly root.
    pub dir: String,
    /// Git charts to check out first.
    pub git_charts: Vec<GitChart>,
    /// The steps in deployment order: a root module to apply, or manifests to apply.
    pub steps: Vec<TerraformStep>,
    /// The root modules in reverse order, for `terraform destroy`.
    pub destroy: Vec<TerraformModule>,
}

/// One step of the Terraform path.
#[derive(Clone, Debug, Serialize)]
pub struct TerraformStep {
    /// A root module to apply, if this step is one.
    pub module: Vec<TerraformModule>,
    /// The lines applying a Kubernetes manifest with kubectl, if this step is one (with its
    /// stage's steps before and after).
    pub kubectl: Vec<String>,
    /// The steps after the module's stages are applied: bindings and scripts.
    pub after: Vec<String>,
}

/// One root module (phase).
#[derive(Clone, Debug, Serialize)]
pub struct TerraformModule {
    /// Its directory, relative to the assembly root.
    pub dir: String,
    /// `-var` arguments needed beyond the defaults, space-separated, or empty.
    pub vars: String,
    /// Whether it talks to the Kubernetes API (through the admin tunnel).
    pub kubernetes_api: bool,
    /// The steps before it is destroyed (its stages', last stage first): bindings and
    /// scripts.
    pub before_destroy: Vec<String>,
}

/// Compiles the runbook template on another thread, so that the first runbook rendered later
/// finds it ready (or waits only for the rest): a command that is about to load stack files and
/// synthesize calls it first, and the compile runs beside that work.
pub fn prepare() {
    let _ = std::thread::Builder::new()
        .name("runbook-template".to_owned())
        .spawn(|| {
            let _ = registry();
        });
}

/// A registry as the runbooks need it: strict (a missing field is an error, not an empty
/// string) and escaping nothing (the data is quoted where it is a shell word).
fn handlebars() -> Handlebars<'static> {
    let mut hb = Handlebars::new();
    hb.set_strict_mode(true);
    hb.register_escape_fn(handlebars::no_escape);
    hb
}

fn registry() -> Result<&'static Handlebars<'static>, RunbookError> {
    static REGISTRY: OnceLock<Result<Handlebars<'static>, String>> = OnceLock::new();
    REGISTRY
        .get_or_init(|| {
            let mut hb = handlebars();
            // The file holds the main template, then partials each introduced by a
            // `{{!-- template: NAME --}}` line. Compiling pieces keeps start-up fast: the
            // compiler's cost grows with the square of a template's length.
            let mut pieces = TEMPLATE.split(PARTIAL_MARKER);
            let main = pieces.next().unwrap_or_default();
            hb.register_template_string("runbook", main)
                .map_err(|e| e.to_string())?;
            for piece in pieces {
                let (name, body) = piece
                    .split_once(" --}}\n")
                    .ok_or_else(|| format!("malformed partial marker before `{piece:.40}`"))?;
                hb.register_partial(name, body).map_err(|e| e.to_string())?;
            }
            Ok(hb)
        })
        .as_ref()
        .map_err(|e| RunbookError(e.clone()))
}

/// The fleet's template, compiled only when a fleet's runbook is rendered.
fn fleet_registry() -> Result<&'static Handlebars<'static>, RunbookError> {
    static REGISTRY: OnceLock<Result<Handlebars<'static>, String>> = OnceLock::new();
    REGISTRY
        .get_or_init(|| {
            let mut hb = handlebars();
            hb.register_template_string("fleet", FLEET_TEMPLATE)
                .map_err(|e| e.to_string())?;
            Ok(hb)
        })
        .as_ref()
        .map_err(|e| RunbookError(e.clone()))
}

/// Renders the runbook of a stack from its manifest entry.
pub fn render(manifest: &StackManifest) -> Result<String, RunbookError> {
    render_data(&data(manifest))
}

/// Renders prepared data with the runbook template.
pub fn render_data(data: &RunbookData) -> Result<String, RunbookError> {
    registry()?
        .render("runbook", data)
        .map_err(|e| RunbookError(e.to_string()))
}

/// Free text from a description as Markdown prose: one line (control characters become
/// spaces) with its backticks escaped, so that it can neither open a code block a reader would
/// run nor close one around it.
pub(crate) fn prose(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '`' => out.push_str("\\`"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

fn artifact_paths(artifacts: &[Artifact]) -> Vec<String> {
    artifacts.iter().map(|a| a.path.clone()).collect()
}

fn checkout_dir(url: &str) -> String {
    let last = url
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("chart");
    last.strip_suffix(".git").unwrap_or(last).to_owned()
}

/// An imported cluster as the prerequisites list it.
#[derive(Clone, Debug, Serialize)]
pub struct ImportedClusterData {
    /// Its name.
    pub name: String,
    /// What it is stated to run, each with the command that checks it.
    pub runs: Vec<AddOnData>,
}

/// One add-on an imported cluster runs.
#[derive(Clone, Debug, Serialize)]
pub struct AddOnData {
    /// What it is.
    pub what: &'static str,
    /// The command that shows it.
    pub check: String,
}

/// The prerequisites' view of `cluster`.
fn imported_cluster(
    cluster: &crate::assembly::inventory::ImportedCluster,
    region: &str,
) -> ImportedClusterData {
    use crate::assembly::inventory::AddOn;
    let name = &cluster.name;
    ImportedClusterData {
        name: name.clone(),
        runs: cluster
            .runs
            .iter()
            .map(|a| match a {
                AddOn::PodIdentityAgent => AddOnData {
                    what: "the EKS Pod Identity agent add-on (the stack's roles reach their pods through it)",
                    check: format!("aws eks describe-addon --region {region} --cluster-name {name} --addon-name eks-pod-identity-agent --query addon.status"),
                },
                AddOn::LoadBalancerController => AddOnData {
                    what: "the AWS Load Balancer Controller (it makes the endpoint's load balancer)",
                    check: "kubectl -n kube-system get deployment aws-load-balancer-controller".to_owned(),
                },
                AddOn::NvidiaDevicePlugin => AddOnData {
                    what: "the NVIDIA device plugin (GPU nodes advertise nvidia.com/gpu)",
                    check: "kubectl get nodes -o custom-columns=NAME:.metadata.name,GPUS:.status.allocatable.nvidia\\.com/gpu".to_owned(),
                },
            })
            .collect(),
    }
}

/// The runbook's data for a stack's manifest entry (the only thing it reads).
pub fn data(manifest: &StackManifest) -> RunbookData {
    let region = manifest.region.clone();
    let inventory = &manifest.inventory;
    let eks_cluster = manifest.eks_cluster.clone().unwrap_or_default();
    let kubernetes_version = inventory.kubernetes_version.clone().unwrap_or_default();
    let hyperpod_cluster = inventory
        .hyperpod_cluster
        .as_ref()
        .map(|c| c.name.clone())
        .unwrap_or_default();
    // Karpenter pools come after the fixed groups: their nodes appear only when pods ask.
    let (pools, mut capacity): (Vec<_>, Vec<_>) = inventory
        .capacity
        .iter()
        .filter_map(|entry| capacity_line(entry, &region).map(|line| (entry.pool, line)))
        .partition(|(pool, _)| *pool);
    capacity.extend(pools);
    let capacity: Vec<CapacityData> = capacity.into_iter().map(|(_, line)| line).collect();
    let endpoints: Vec<EndpointData> = inventory.endpoints.iter().map(endpoint).collect();
    let alerts = inventory.alerts.clone();

    let stack_name_of = |stage: Option<&str>| -> String {
        stage
            .and_then(|s| manifest.cloudformation_stack_name(s))
            .unwrap_or_default()
            .to_owned()
    };
    let mut stages = Vec::new();
    let mut cluster_seen = false;
    for (index, entry) in manifest.stages.iter().enumerate() {
        let in_stage = |stage: &str| stage == entry.name();
        let paths = artifact_paths(entry.artifacts());
        let first_path = paths.first().cloned().unwrap_or_default();
        let mut data = StageData {
            number: index + 1,
            name: entry.name().to_owned(),
            kind: entry.kind().to_owned(),
            region: region.clone(),
            first_cluster_access: false,
            eks_cluster: eks_cluster.clone(),
            cloudformation: Vec::new(),
            upload: Vec::new(),
            helm: Vec::new(),
            kubernetes: Vec::new(),
            before: cloudformation_steps(manifest, entry, When::BeforeApply),
            after: cloudformation_steps(manifest, entry, When::AfterApply),
            before_delete: cloudformation_steps(manifest, entry, When::BeforeDelete),
        };
        match entry {
            StageManifest::CloudFormation {
                stack_name,
                capabilities,
                parameters,
                deploy_from_s3,
                ..
            } => {
                let parameters: Vec<ParameterData> = parameters
                    .iter()
                    .map(|p| ParameterData {
                        name: p.name.clone(),
                        default: p.default.clone().unwrap_or_default(),
                    })
                    .collect();
                let capabilities = capabilities.join(" ");
                let creates_hyperpod = inventory
                    .hyperpod_cluster
                    .as_ref()
                    .is_some_and(|c| in_stage(&c.stage));
                // The node groups' GPU instances this stage waits for (pools and HyperPod's
                // instances join on their own).
                let gpu_node_types: Vec<String> = inventory
                    .capacity
                    .iter()
                    .filter(|c| in_stage(&c.stage) && c.launched_by == LaunchedBy::Ec2 && !c.pool)
                    .filter(|c| {
                        catalog::instance(&c.instance_type).is_some_and(|i| i.gpu_count > 0)
                    })
                    .map(|c| c.instance_type.clone())
                    .collect();
                let capacity_ends: Vec<CapacityEndData> = inventory
                    .capacity_ends
                    .iter()
                    .filter(|c| in_stage(&c.stage))
                    .map(capacity_end)
                    .collect();
                data.cloudformation.push(CloudFormationStage {
                    deploy_from_s3: *deploy_from_s3,
                    stack_name: stack_name.clone(),
                    template: first_path,
                    capabilities,
                    parameter_overrides: parameters
                        .iter()
                        .map(
                            |p| match manifest.inputs.iter().find(|i| i.name == p.name) {
                                Some(input) => format!("{}=\"${}\"", p.name, input.variable),
                                None => format!("{}={}", p.name, sh_quote(&p.default)),
                            },
                        )
                        .collect::<Vec<_>>()
                        .join(" "),
                    parameters,
                    creates_hyperpod,
                    gpu_node_types,
                    capacity_ends,
                });
            }
            StageManifest::S3Upload { bucket, prefix, .. } => {
                data.upload.push(UploadStage {
                    bucket_stack: stack_name_of(bucket.stage.as_deref()),
                    bucket_output: bucket.output.clone(),
                    prefix: prefix.clone(),
                    files: paths,
                });
            }
            StageManifest::Helm {
                release,
                namespace,
                chart,
                set_from_outputs,
                wait,
                ..
            } => {
                data.first_cluster_access = !cluster_seen;
                cluster_seen = true;
                let mut helm = HelmStage {
                    release: release.clone(),
                    namespace: namespace.clone(),
                    create_namespace: crate::assembly::manifest::helm_creates_namespace(namespace),
                    values: first_path,
                    git: Vec::new(),
                    repository: Vec::new(),
                    oci: Vec::new(),
                    sets: set_from_outputs
                        .iter()
                        .map(|s| SetFromOutput {
                            key: s.key.clone(),
                            stack_name: stack_name_of(s.stage.as_deref()),
                            output: s.output.clone(),
                        })
                        .collect(),
                    wait: *wait,
                };
                match chart {
                    Chart::Git { url, commit, path } => helm.git.push(GitChart {
                        checkout: checkout_dir(url),
                        url: url.clone(),
                        commit: commit.clone(),
                        path: path.clone(),
                    }),
                    Chart::Repository {
                        repository,
                        name,
                        version,
                    } => {
                        let repo = RepositoryChart {
                            repository: repository.clone(),
                            name: name.clone(),
                            version: version.clone(),
                        };
                        if repo.repository.starts_with("oci://") {
                            helm.oci.push(repo);
                        } else {
                            helm.repository.push(repo);
                        }
                    }
                }
                data.helm.push(helm);
            }
            StageManifest::Kubernetes { .. } => {
                data.first_cluster_access = !cluster_seen;
                cluster_seen = true;
                let stage_endpoints: Vec<EndpointData> = inventory
                    .endpoints
                    .iter()
                    .zip(&endpoints)
                    .filter(|(e, _)| in_stage(&e.stage))
                    .map(|(_, data)| data.clone())
                    .collect();
                let node_pools: Vec<String> = inventory
                    .node_pools
                    .iter()
                    .filter(|p| in_stage(&p.stage))
                    .map(|p| p.name.clone())
                    .collect();
                let stagings: Vec<StagingData> = inventory
                    .stagings
                    .iter()
                    .filter(|st| in_stage(&st.stage))
                    .map(|st| staging(&region, st))
                    .collect();
                let dashboards: Vec<String> = inventory
                    .dashboards
                    .iter()
                    .filter(|d| in_stage(&d.stage))
                    .map(|d| d.name.clone())
                    .collect();
                let values: Vec<DeployValueData> = match entry {
                    StageManifest::Kubernetes { values, .. } => values
                        .iter()
                        .map(|v| {
                            let variable = crate::assembly::fill::variable(&manifest.inputs, v);
                            match &v.from {
                                ValueSource::Output(out) => {
                                    let stage = out.stage.clone().unwrap_or_default();
                                    DeployValueData {
                                        read: format!(
                                            "{variable}=$(aws cloudformation describe-stacks --region {} --stack-name {} \\\n  --query \"Stacks[0].Outputs[?OutputKey=='{}'].OutputValue\" --output text)",
                                            region,
                                            stack_name_of(Some(&stage)),
                                            out.output
                                        ),
                                        variable,
                                        stage,
                                        output: out.output.clone(),
                                    }
                                }
                                // Set once, with the stack's other inputs (section 1).
                                ValueSource::Input(_) => DeployValueData {
                                    read: String::new(),
                                    variable,
                                    stage: String::new(),
                                    output: String::new(),
                                },
                            }
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                let apply = if values.is_empty() {
                    format!("kubectl apply -f {first_path}")
                } else {
                    fill_command(manifest, entry, &values)
                };
                data.kubernetes.push(KubernetesStage {
                    manifest: first_path,
                    endpoints: stage_endpoints,
                    node_pools,
                    apply,
                    stagings,
                    values,
                    dashboards,
                });
            }
        }
        stages.push(data);
    }

    let terraform = manifest
        .terraform
        .as_ref()
        .map(|tf| {
            let mut dirs: Vec<String> = Vec::new();
            for a in &tf.artifacts {
                if let Some((d, _)) = a.path.rsplit_once('/') {
                    if !dirs.iter().any(|x| x == d) {
                        dirs.push(d.to_owned());
                    }
                }
            }
            let git_charts: Vec<GitChart> = stages
                .iter()
                .flat_map(|s| s.helm.iter())
                .flat_map(|h| h.git.iter().cloned())
                .collect();
            // A module's directory is named after its first stage (`03-hyperpod-dependencies`);
            // it holds the stages up to the next module or Kubernetes stage.
            let mut steps = Vec::new();
            let mut current: Option<usize> = None;
            // The module holding each stage, for values Kubernetes stages read of them.
            let mut phase_of: std::collections::BTreeMap<String, String> =
                std::collections::BTreeMap::new();
            let mut phase: Option<String> = None;
            for stage in &stages {
                let prefix = format!("{:02}-{}", stage.number, stage.name);
                if let Some(dir) = dirs.iter().find(|d| d.ends_with(&format!("/{prefix}"))) {
                    phase = Some(dir.clone());
                }
                if let Some(dir) = &phase {
                    phase_of.insert(stage.name.clone(), dir.clone());
                }
                let entry = manifest.stages.get(stage.number - 1);
                let plan_lines =
                    |when: When, phase_of: &std::collections::BTreeMap<String, String>| {
                        entry
                            .map(|e| {
                                step_lines(e.steps_at(when), &region, |out| {
                                    terraform_read(phase_of, out)
                                })
                            })
                            .unwrap_or_default()
                    };
                if let Some(dir) = dirs.iter().find(|d| d.ends_with(&format!("/{prefix}"))) {
                    steps.push(TerraformStep {
                        module: vec![TerraformModule {
                            dir: dir.clone(),
                            vars: String::new(),
                            kubernetes_api: !stage.helm.is_empty(),
                            before_destroy: Vec::new(),
                        }],
                        kubectl: Vec::new(),
                        after: Vec::new(),
                    });
                    current = Some(steps.len() - 1);
                }
                // A Kubernetes stage carries its own steps in its kubectl block.
                if let Some(i) = current.filter(|_| stage.kubernetes.is_empty()) {
                    let after = plan_lines(When::AfterApply, &phase_of);
                    steps[i].after.extend(after);
                    let mut before_delete = plan_lines(When::BeforeDelete, &phase_of);
                    if let Some(module) = steps[i].module.first_mut() {
                        // Destroyed last stage first.
                        before_delete.append(&mut module.before_destroy);
                        module.before_destroy = before_delete;
                    }
                }
                for k in &stage.kubernetes {
                    // Deploy-time values from the outputs of the modules that create them
                    // (inputs are set with the others, section 1).
                    let mut lines: Vec<String> = Vec::new();
                    for v in k.values.iter().filter(|v| !v.output.is_empty()) {
                        let dir = phase_of.get(&v.stage).cloned().unwrap_or_default();
                        lines.push(format!(
                            "{}=$(terraform -chdir={dir} output -raw {})",
                            v.variable,
                            crate::app::snake_case(&v.output)
                        ));
                    }
                    let mut before = plan_lines(When::BeforeApply, &phase_of);
                    before.append(&mut lines);
                    let mut lines = before;
                    lines.push(k.apply.clone());
                    lines.extend(plan_lines(When::AfterApply, &phase_of));
                    steps.push(TerraformStep {
                        module: Vec::new(),
                        kubectl: lines,
                        after: Vec::new(),
                    });
                    current = None;
                }
                if let Some(module) = current.and_then(|i| steps[i].module.first_mut()) {
                    for h in &stage.helm {
                        if let Some(g) = h.git.first() {
                            let var = format!(
                                "-var \"{}_chart_path=$PWD/../{}/{}\"",
                                h.release.replace('-', "_"),
                                g.checkout,
                                g.path
                            );
                            module.vars = [module.vars.as_str(), var.as_str()]
                                .iter()
                                .filter(|v| !v.is_empty())
                                .copied()
                                .collect::<Vec<_>>()
                                .join(" ");
                        }
                    }
                }
            }
            let mut destroy: Vec<TerraformModule> = steps
                .iter()
                .flat_map(|s| s.module.iter().cloned())
                .collect();
            destroy.reverse();
            TerraformData {
                dir: format!("{}/terraform", manifest.name),
                git_charts,
                steps,
                destroy,
            }
        })
        .into_iter()
        .collect();

    let mut cleanup = stages.clone();
    cleanup.reverse();
    let admin_host = manifest
        .admin_host
        .iter()
        .map(|a| AdminHostData {
            name_tag: a.name_tag.clone(),
            local_port: a.local_port,
            cluster: eks_cluster.clone(),
            region: manifest.region.clone(),
        })
        .collect();
    let all_steps = || manifest.stages.iter().flat_map(|s| s.steps());
    let needs_docker = all_steps().any(|s| s.tools().contains(&"docker"));
    let needs_curl = all_steps().any(|s| s.tools().contains(&"curl"));
    let inputs: Vec<InputData> = manifest
        .inputs
        .iter()
        .map(|i| InputData {
            name: i.name.clone(),
            variable: i.variable.clone(),
            terraform_variable: i.variable.to_ascii_lowercase(),
            default: i
                .default
                .as_deref()
                .map_or_else(|| format!("<{}>", i.expected), sh_quote),
            // One sentence, whatever the declaration ends with.
            description: format!("{}.", i.description.trim_end_matches('.')),
            expected: i.expected.clone(),
            stages: i.stages.join(", "),
        })
        .collect();
    let needs_fill = stages
        .iter()
        .flat_map(|s| s.kubernetes.iter())
        .any(|k| !k.values.is_empty());
    RunbookData {
        inputs,
        needs_fill,
        needs_docker,
        needs_curl,
        stack: manifest.name.clone(),
        imported_cluster: inventory
            .imported_cluster
            .iter()
            .map(|c| imported_cluster(c, &region))
            .collect(),
        region,
        description: prose(inventory.description.as_deref().unwrap_or_default()),
        eks_cluster,
        kubernetes_version,
        hyperpod: !hyperpod_cluster.is_empty(),
        hyperpod_cluster,
        capacity,
        stages,
        cleanup,
        terraform,
        endpoints,
        admin_host,
        alerts,
    }
}

/// The steps of a CloudFormation-path stage at `when`, each with its values read from the
/// outputs of the stage's stacks.
fn cloudformation_steps(
    manifest: &StackManifest,
    entry: &StageManifest,
    when: When,
) -> Vec<StepData> {
    entry
        .steps_at(when)
        .map(|step| StepData {
            summary: step.summary(),
            reads: step
                .reads()
                .iter()
                .map(|r| cloudformation_read(manifest, &r.variable, r.output))
                .collect(),
            script: step.script(&manifest.region),
        })
        .collect()
}

/// The line reading `output` into `variable` on the CloudFormation path.
fn cloudformation_read(manifest: &StackManifest, variable: &str, output: &StageOutput) -> String {
    let stack_name = output
        .stage
        .as_deref()
        .and_then(|s| manifest.cloudformation_stack_name(s))
        .unwrap_or_default();
    format!(
        "{variable}=$(aws cloudformation describe-stacks --region {} --stack-name {stack_name} \\\n  --query \"Stacks[0].Outputs[?OutputKey=='{}'].OutputValue\" --output text)",
        manifest.region, output.output
    )
}

/// The line reading `output` on the Terraform path: the output of the phase that creates it.
fn terraform_read(
    phase_of: &std::collections::BTreeMap<String, String>,
    output: &StageOutput,
) -> String {
    let dir = output
        .stage
        .as_deref()
        .and_then(|s| phase_of.get(s))
        .cloned()
        .unwrap_or_default();
    format!(
        "{}=$(terraform -chdir={dir} output -raw {})",
        variable_of(&output.output),
        crate::app::snake_case(&output.output)
    )
}

/// The lines carrying out `steps` on one path: each step's value bindings, then its script.
fn step_lines<'a>(
    steps: impl Iterator<Item = &'a Step>,
    region: &str,
    read: impl Fn(&StageOutput) -> String,
) -> Vec<String> {
    let mut lines = Vec::new();
    for step in steps {
        lines.extend(step.reads().iter().map(|r| read(r.output)));
        lines.push(step.script(region));
    }
    lines
}

/// A reservation's timeline as the runbook shows it (UTC, to the minute).
#[derive(Clone, Debug, Serialize)]
pub struct TimelineData {
    /// `block` or `plan`.
    pub what: &'static str,
    /// Whose lead times are counted (`EC2 and EKS publish`).
    pub sources: &'static str,
    /// The reservation opens.
    pub start: String,
    /// What happens then (a node group scaled up, Karpenter launching on demand, SageMaker
    /// provisioning).
    pub opens: String,
    /// What the service does before the end to scale down; empty when its terminations are
    /// the scale-down (a training plan).
    pub scale_down: String,
    /// The endpoint serves; empty when the stack serves no model there or its cold start is
    /// not estimated.
    pub serving_from: String,
    /// The cold start counted, minutes (with `serving_from`).
    pub cold_start_minutes: String,
    /// Traffic stops (and the group is scaled to zero by its schedule).
    pub drain_by: String,
    /// What the drain is.
    pub drain: String,
    /// The service scales the group down.
    pub scale_down_at: String,
    /// The service begins terminating instances.
    pub terminations_from: String,
    /// What that is.
    pub terminations: String,
    /// The reservation ends.
    pub end: String,
    /// Its duration, days.
    pub days: i64,
    /// Minutes paid for without serving; empty when the cold start is unknown.
    pub idle_minutes: String,
}

impl TimelineData {
    /// The runbook's rows of timeline `t` of a reservation feeding `entry`.
    fn of(entry: &CapacityEntry, t: &crate::assembly::inventory::Timeline) -> TimelineData {
        let hyperpod = entry.launched_by == LaunchedBy::HyperPod;
        let (what, sources, opens, drain, scale_down, terminations) = if hyperpod {
            (
                "plan",
                "SageMaker publishes",
                "the plan turns Active: SageMaker provisions the instance group's instances",
                "stop sending requests",
                String::new(),
                "SageMaker begins terminating the plan's instances (30 minutes before the end)",
            )
        } else if entry.pool {
            (
                "block",
                "EC2 and EKS publish",
                "the block opens: Karpenter launches its nodes as the pool's pods ask",
                "stop sending requests",
                "Karpenter drains the block's nodes (40 minutes before the end)".to_owned(),
                "EC2 begins terminating the block's instances (30 minutes before the end)",
            )
        } else {
            (
                "block",
                "EC2 and EKS publish",
                "the block opens: the stage's schedule (EventBridge Scheduler) scales the node group up",
                "stop sending requests; the stage's schedule scales the node group to zero",
                "EKS scales the node group to zero itself (40 minutes before the end)".to_owned(),
                "EC2 begins terminating the block's instances (30 minutes before the end)",
            )
        };
        TimelineData {
            what,
            sources,
            start: t.start.clone(),
            opens: opens.to_owned(),
            scale_down,
            serving_from: t.serving_from.clone().unwrap_or_default(),
            cold_start_minutes: t
                .cold_start_minutes
                .map(|m| m.to_string())
                .unwrap_or_default(),
            drain_by: t.drain_by.clone(),
            drain: match &t.drain_job {
                Some(job) => format!(
                    "the CronJob `{job}` cordons the instance group's nodes and evicts their pods, as kubectl drain does (HyperPod drains nothing itself)"
                ),
                None => drain.to_owned(),
            },
            scale_down_at: t.scale_down_at.clone(),
            terminations_from: t.terminations_from.clone(),
            terminations: terminations.to_owned(),
            end: t.end.clone(),
            days: t.days,
            idle_minutes: t.idle_minutes.map(|m| m.to_string()).unwrap_or_default(),
        }
    }
}

/// The runbook's line for a group of instances; `None` for on-demand EC2 instances without
/// GPUs (system nodes).
fn capacity_line(entry: &CapacityEntry, region: &str) -> Option<CapacityData> {
    let hyperpod = entry.launched_by == LaunchedBy::HyperPod;
    let catalog_entry = catalog::instance(&entry.instance_type);
    let timeline = match &entry.source {
        CapacitySourceEntry::CapacityBlock {
            timeline: Some(t), ..
        }
        | CapacitySourceEntry::TrainingPlan {
            timeline: Some(t), ..
        } => Some(TimelineData::of(entry, t)),
        _ => None,
    };
    let training_plan =
        hyperpod && matches!(entry.source, CapacitySourceEntry::TrainingPlan { .. });
    let capacity_block = matches!(entry.source, CapacitySourceEntry::CapacityBlock { .. });
    let capacity_reservation = matches!(
        entry.source,
        CapacitySourceEntry::CapacityReservation { .. }
    );
    let (count, reservation, zone_id) = match &entry.source {
        CapacitySourceEntry::CapacityBlock { reservation, .. } if entry.pool => {
            (entry.max_count, reservation.clone(), None)
        }
        CapacitySourceEntry::CapacityBlock {
            reservation,
            zone_id,
            reserved_count,
            ..
        }
        | CapacitySourceEntry::CapacityReservation {
            reservation,
            zone_id,
            reserved_count,
            ..
        } => (
            reserved_count.unwrap_or(entry.max_count),
            reservation.clone(),
            zone_id.clone(),
        ),
        CapacitySourceEntry::TrainingPlan { arn, zone_id, .. } if hyperpod => {
            (entry.count, arn.clone(), zone_id.clone())
        }
        CapacitySourceEntry::OnDemand if hyperpod => (entry.count, String::new(), None),
        CapacitySourceEntry::OnDemand | CapacitySourceEntry::TrainingPlan { .. } => {
            if catalog_entry.is_none_or(|i| i.gpu_count == 0) {
                return None;
            }
            (entry.count, String::new(), None)
        }
    };
    let vcpus = catalog_entry.map(|i| i.vcpus).unwrap_or_default();
    let ec2_name = entry
        .instance_type
        .strip_prefix("ml.")
        .unwrap_or(&entry.instance_type);
    let price = |per_hour: f64| format!("${:.2}", per_hour * count.max(0) as f64);
    Some(CapacityData {
        path: entry.path.clone(),
        instance_type: ec2_name.to_owned(),
        deployed_type: entry.service_instance_type.clone(),
        count,
        vcpus,
        total_vcpus: i64::from(vcpus).saturating_mul(count.max(0)),
        family: ec2_name
            .chars()
            .next()
            .map(|c| c.to_ascii_uppercase().to_string())
            .unwrap_or_default(),
        on_demand_per_hour: catalog_entry
            .and_then(|i| i.on_demand_usd_per_hour(region))
            .map(price)
            .unwrap_or_default(),
        reference_per_hour: catalog_entry
            .filter(|i| i.on_demand_usd_per_hour(region).is_none())
            .and_then(|i| i.on_demand_usd_per_hour_us_east_1)
            .map(price)
            .unwrap_or_default(),
        hyperpod,
        selected_by_tags: capacity_block && reservation.starts_with("tag "),
        training_plan,
        capacity_reservation,
        capacity_block,
        reservation,
        zone_id: zone_id.unwrap_or_default(),
        pool: entry.pool,
        timeline,
    })
}

/// The runbook's view of a warning before reserved capacity ends: each reservation read from
/// the shell variable of its stack input.
fn capacity_end(c: &CapacityEndEntry) -> CapacityEndData {
    let variable = |input: &Option<String>| input.as_deref().map(variable_of).unwrap_or_default();
    let training_plan_variable = variable(&c.training_plan_input);
    CapacityEndData {
        reservation_id: c.reservation_id.clone().unwrap_or_default(),
        reservation_variable: variable(&c.reservation_input),
        training_plan_arn: c.training_plan_arn.clone().unwrap_or_default(),
        training_plan_name: c
            .training_plan_arn
            .as_deref()
            .and_then(|a| a.rsplit('/').next())
            .unwrap_or_default()
            .to_owned(),
        training_plan_name_from_variable: if training_plan_variable.is_empty() {
            String::new()
        } else {
            format!("\"${{{training_plan_variable}##*/}}\"")
        },
        training_plan_variable,
        end_time: c.end_time.clone(),
        lead_hours: c.lead_hours,
    }
}

fn staging(region: &str, st: &StagingEntry) -> StagingData {
    // A name the deployment resolves is the variable the stage's reads set from its output.
    let variable = st
        .bucket_output
        .as_deref()
        .map(crate::assembly::plan::variable_of)
        .unwrap_or_default();
    let bucket = match &st.bucket_output {
        Some(_) => format!("${variable}"),
        None => st.bucket.clone(),
    };
    StagingData {
        model_id: st.model_id.clone(),
        revision: st.revision.clone(),
        url: format!("s3://{bucket}/{}", st.prefix),
        manifest_url: format!(
            "s3://{bucket}/{}.manifest.json",
            st.prefix.trim_end_matches('/')
        ),
        job: st.job.clone(),
        namespace: st.namespace.clone(),
        image: st.image.clone(),
        minutes: st
            .estimate_secs
            .map(|s| s.div_ceil(60).to_string())
            .unwrap_or_default(),
        limit: st.limited_by.clone().unwrap_or_default(),
        size_gib: st
            .size_gib()
            .map(|gib| format!("{gib:.1}"))
            .unwrap_or_default(),
        storage_usd_per_month: st
            .storage_usd_per_month(region)
            .map(|usd| format!("{usd:.2}"))
            .unwrap_or_default(),
        token_secret: st
            .hf_token
            .as_ref()
            .map(|t| t.name.clone())
            .unwrap_or_default(),
        token_key: st
            .hf_token
            .as_ref()
            .map(|t| t.key.clone())
            .unwrap_or_default(),
        bucket_output: st.bucket_output.clone().unwrap_or_default(),
        bucket_variable: variable,
    }
}

fn endpoint(e: &EndpointEntry) -> EndpointData {
    let request_body = serde_json::json!({
        "model": e.served_model_name,
        "messages": [{"role": "user", "content": "Say hello in one sentence."}],
        "max_tokens": 64,
    })
    .to_string();
    let secret = |k: &Option<SecretKeyEntry>| {
        k.as_ref()
            .map(|k| (k.name.clone(), k.key.clone()))
            .unwrap_or_default()
    };
    let (hf_token_secret, hf_token_key) = secret(&e.hf_token);
    let (api_key_secret, api_key_key) = secret(&e.api_key);
    EndpointData {
        name: e.name.clone(),
        namespace: e.namespace.clone(),
        model_id: e.model_id.clone(),
        served_model_name: e.served_model_name.clone(),
        revision: e.revision.clone().unwrap_or_default(),
        remote_code: e.remote_code,
        image: e.image.clone(),
        image_tag: e.image_as_given.clone().unwrap_or_default(),
        image_digest: e.image_digest.clone().unwrap_or_default(),
        engine_release: e.engine_release.clone().unwrap_or_default(),
        hf_token_secret,
        hf_token_key,
        api_key_jsonpath: if api_key_key.is_empty() {
            String::new()
        } else {
            format!("{{.data.{api_key_key}}}")
        },
        api_key_secret,
        api_key_key,
        gpus: e.gpus,
        shm_gib: e.shm_gib,
        port: e.port,
        operator: e.operator,
        deployment: !e.operator && e.nodes_per_replica <= 1,
        group: !e.operator && e.nodes_per_replica > 1,
        nodes_per_replica: e.nodes_per_replica,
        fabric_floor_gbs: e
            .fabric_check_floor_mb_per_s
            .map(|mb| format!("{:.1}", mb as f64 / 1000.0))
            .unwrap_or_default(),
        startup_secs: e.startup_secs,
        staged: e.staged,
        weights_source: e.weights_source.clone(),
        cold_start_minutes: e
            .cold_start_secs
            .map(|s| s.div_ceil(60).to_string())
            .unwrap_or_default(),
        startup_minutes: e.startup_secs.div_ceil(60),
        rollout_timeout_secs: e.rollout_deadline_secs,
        load_balancer: e.reached_through != ReachedThrough::ClusterIp,
        internal: e.reached_through == ReachedThrough::InternalLoadBalancer,
        request_body,
    }
}
