//! The format as data: every object's fields, their types and docs. The same tables drive the
//! structural check of a file (unknown fields, wrong types, missing fields) and the JSON
//! Schema, so the two cannot drift apart.

use crate::constructs::{
    AccessPolicy, DeepHealthCheck, Exposure, NatGateways, NodeRecovery, TaintEffect,
};
use serde_json::{json, Map, Value};

/// What a reference must point at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// A VPC: `Network` or `Network.vpc`.
    Vpc,
    /// One subnet or a list of them: `Network.private_subnets`, `Network.gpu_subnet`, ...
    Subnets,
    /// A security group: `ClusterSecurityGroup`.
    SecurityGroup,
    /// An EKS cluster: `Eks`.
    Eks,
    /// A HyperPod cluster: `HyperPod`.
    HyperPod,
    /// Lifecycle scripts: `Lifecycle`.
    Lifecycle,
    /// Karpenter: `Karpenter`.
    Karpenter,
    /// One subnet: `Network.gpu_subnet`, `Network.hyperpod_subnet`.
    Subnet,
    /// An S3 bucket: `Lifecycle` or `Lifecycle.bucket`.
    Bucket,
}

impl Want {
    /// How the wanted thing is described in messages.
    pub fn describe(self) -> &'static str {
        match self {
            Want::Vpc => "a VPC (a `network` construct, or `<network>.vpc`)",
            Want::Subnets => "subnets (`<network>.private_subnets`, `.public_subnets`, `.hyperpod_subnet` or `.gpu_subnet`)",
            Want::SecurityGroup => "a security group (a `cluster_security_group` construct)",
            Want::Eks => "an EKS cluster (an `eks_cluster` construct)",
            Want::HyperPod => "a HyperPod cluster (a `hyperpod_cluster` construct)",
            Want::Lifecycle => "lifecycle scripts (a `lifecycle_scripts` construct)",
            Want::Karpenter => "Karpenter (a `karpenter` construct)",
            Want::Subnet => "one subnet (`<network>.gpu_subnet` or `.hyperpod_subnet`)",
            Want::Bucket => "a bucket (a `lifecycle_scripts` construct, or `<lifecycle>.bucket`)",
        }
    }
}

/// A field's type.
#[derive(Clone, Copy, Debug)]
pub enum Ty {
    /// Any scalar, read as text.
    Str,
    /// A non-negative integer up to `u32::MAX`.
    U32,
    /// A non-negative integer up to `u64::MAX`.
    U64,
    /// An integer (`i64`).
    I64,
    /// A number.
    F64,
    /// `true` or `false`.
    Bool,
    /// One of the listed strings.
    Enum(&'static [&'static str]),
    /// A mapping of string keys to scalar values (tags, labels, env).
    StrMap,
    /// A list of scalars.
    StrList,
    /// A list of enum values.
    EnumList(&'static [&'static str]),
    /// A reference to a construct (or one of its attributes) by id.
    Ref(Want),
    /// One reference or a list of references.
    Refs(Want),
    /// A nested object.
    Obj(&'static Shape),
    /// A list of nested objects.
    List(&'static Shape),
    /// The list of constructs of a stage.
    Constructs,
    /// The list of stages.
    Stages,
}

/// A field of an object.
#[derive(Debug)]
pub struct Field {
    /// The key.
    pub name: &'static str,
    /// Its type.
    pub ty: Ty,
    /// Whether it must be present.
    pub required: bool,
    /// One line of documentation.
    pub doc: &'static str,
}

/// An object: its fields, in documentation order.
#[derive(Debug)]
pub struct Shape {
    /// The name used in messages (and `$defs`).
    pub name: &'static str,
    /// One line of documentation.
    pub doc: &'static str,
    /// The fields.
    pub fields: &'static [Field],
}

impl Shape {
    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

const fn req(name: &'static str, ty: Ty, doc: &'static str) -> Field {
    Field {
        name,
        ty,
        required: true,
        doc,
    }
}

const fn opt(name: &'static str, ty: Ty, doc: &'static str) -> Field {
    Field {
        name,
        ty,
        required: false,
        doc,
    }
}

/// The names of the Helm presets (the builder functions of `constructs::helm`).
pub const HELM_PRESETS: &[&str] = &[
    "hyperpod-dependencies",
    "nvidia-device-plugin",
    "efa-device-plugin",
    "aws-load-balancer-controller",
    "karpenter",
];

/// The top level of a stack file.
pub static FILE: Shape = Shape {
    name: "StackFile",
    doc: "One hyperforge stack: its name, region, tags and ordered deployment stages.",
    fields: &[
        req(
            "stack",
            Ty::Str,
            "The stack's name; it prefixes the CloudFormation stack names of its stages.",
        ),
        req("region", Ty::Str, "The AWS region, e.g. `us-west-2`."),
        opt(
            "description",
            Ty::Str,
            "A human description, written into every template.",
        ),
        opt(
            "tags",
            Ty::StrMap,
            "Tags on every taggable resource of this stack.",
        ),
        opt(
            "app_tags",
            Ty::StrMap,
            "App-level tags (shared by every stack of the app; a stack tag of the same key wins).",
        ),
        req("stages", Ty::Stages, "The deployment stages, in order."),
    ],
};

/// A CloudFormation or Kubernetes stage.
pub static CONSTRUCT_STAGE: Shape = Shape {
    name: "ConstructStage",
    doc: "A stage built from constructs: one CloudFormation template, or one multi-document Kubernetes YAML file.",
    fields: &[
        req("name", Ty::Str, "The stage's name, unique in the stack."),
        req("kind", Ty::Enum(&["cloudformation", "kubernetes"]), "`cloudformation` or `kubernetes`."),
        req("constructs", Ty::Constructs, "The constructs placed in the stage, in order."),
    ],
};

/// A Helm stage.
pub static HELM_STAGE: Shape = Shape {
    name: "HelmStage",
    doc: "A stage installing one Helm release with pinned chart and values.",
    fields: &[
        req("name", Ty::Str, "The stage's name, unique in the stack."),
        req("kind", Ty::Enum(&["helm"]), "`helm`."),
        req(
            "preset",
            Ty::Enum(HELM_PRESETS),
            "The release: one of the presets of `hyperforge::constructs::HelmRelease`.",
        ),
        opt(
            "cluster",
            Ty::Ref(Want::Eks),
            "The EKS cluster (for `aws-load-balancer-controller` and `karpenter`).",
        ),
        opt(
            "vpc",
            Ty::Ref(Want::Vpc),
            "The VPC (for `aws-load-balancer-controller`).",
        ),
    ],
};

/// An upload stage.
pub static UPLOAD_STAGE: Shape = Shape {
    name: "UploadStage",
    doc: "A stage copying a construct's files to the bucket it created in an earlier stage.",
    fields: &[
        req("name", Ty::Str, "The stage's name, unique in the stack."),
        req("kind", Ty::Enum(&["upload"]), "`upload`."),
        req(
            "source",
            Ty::Ref(Want::Lifecycle),
            "The construct whose files are uploaded (a `lifecycle_scripts` construct).",
        ),
    ],
};

/// Every stage shape, by kind.
pub const STAGE_KINDS: &[(&str, &Shape)] = &[
    ("cloudformation", &CONSTRUCT_STAGE),
    ("kubernetes", &CONSTRUCT_STAGE),
    ("helm", &HELM_STAGE),
    ("upload", &UPLOAD_STAGE),
];

static ZONAL_SUBNET: Shape = Shape {
    name: "ZonalSubnet",
    doc: "A subnet in one availability zone, from a secondary CIDR block of the VPC.",
    fields: &[
        req("az_id", Ty::Str, "The zone id (e.g. `usw2-az2`): the capacity's zone."),
        opt("cidr", Ty::Str, "The secondary block (default `10.1.0.0/16` for HyperPod, `100.64.0.0/16` for GPU nodes)."),
    ],
};

static NETWORK: Shape = Shape {
    name: "network",
    doc: "A VPC with public and private subnets, NAT, flow logs, and optional HyperPod and GPU subnets.",
    fields: &[
        req("network", Ty::Str, "The construct id."),
        opt("cidr", Ty::Str, "The primary CIDR block, /16 to /20 (default `10.192.0.0/16`)."),
        opt("availability_zones", Ty::U32, "Zones with a public and a private subnet (default 2)."),
        opt("nat_gateways", Ty::Enum(NatGateways::NAMES), "One NAT gateway, or one per zone (default `one`)."),
        opt("hyperpod_subnet", Ty::Obj(&ZONAL_SUBNET), "The HyperPod subnet, in the training plan's zone."),
        opt("gpu_subnet", Ty::Obj(&ZONAL_SUBNET), "The GPU node subnet, in the Capacity Block's zone."),
        opt("flow_log_retention_days", Ty::U32, "Flow log retention in days (default 365)."),
    ],
};

static SECURITY_GROUP: Shape = Shape {
    name: "cluster_security_group",
    doc: "The security group shared by the cluster's nodes.",
    fields: &[
        req("cluster_security_group", Ty::Str, "The construct id."),
        req("vpc", Ty::Ref(Want::Vpc), "The VPC."),
        opt(
            "fsx_lustre_ports",
            Ty::Bool,
            "Open the FSx for Lustre ports between members (default true).",
        ),
    ],
};

static ACCESS_ENTRY: Shape = Shape {
    name: "AccessEntry",
    doc: "An IAM principal allowed into the cluster.",
    fields: &[
        req("principal_arn", Ty::Str, "The role or user ARN."),
        req(
            "policy",
            Ty::Enum(AccessPolicy::NAMES),
            "The access policy.",
        ),
    ],
};

static ADDON: Shape = Shape {
    name: "Addon",
    doc: "An EKS add-on.",
    fields: &[
        req("name", Ty::Str, "The add-on's name."),
        opt("version", Ty::Str, "Its version (default: EKS's default)."),
    ],
};

static EKS: Shape = Shape {
    name: "eks_cluster",
    doc: "An EKS cluster with a private endpoint, secrets encryption, access entries and add-ons.",
    fields: &[
        req("eks_cluster", Ty::Str, "The construct id."),
        req("name", Ty::Str, "The cluster's name."),
        opt("version", Ty::Str, "The Kubernetes version, e.g. `1.33`."),
        opt(
            "subnets",
            Ty::Refs(Want::Subnets),
            "The control plane's subnets.",
        ),
        opt(
            "security_groups",
            Ty::Refs(Want::SecurityGroup),
            "Additional security groups.",
        ),
        opt(
            "public_access_cidrs",
            Ty::StrList,
            "Also allow the public endpoint from these blocks (default: private only).",
        ),
        opt(
            "access_entries",
            Ty::List(&ACCESS_ENTRY),
            "Principals allowed into the cluster.",
        ),
        opt("addons", Ty::List(&ADDON), "EKS add-ons."),
    ],
};

static FILE_ENTRY: Shape = Shape {
    name: "File",
    doc: "A file: its name and contents.",
    fields: &[
        req("name", Ty::Str, "The file name."),
        req("content", Ty::Str, "Its contents."),
    ],
};

static LIFECYCLE: Shape = Shape {
    name: "lifecycle_scripts",
    doc: "A bucket holding the HyperPod lifecycle scripts (default `on_create.sh`).",
    fields: &[
        req("lifecycle_scripts", Ty::Str, "The construct id."),
        opt(
            "on_create_script",
            Ty::Str,
            "Replaces the `on_create.sh` script.",
        ),
        opt(
            "files",
            Ty::List(&FILE_ENTRY),
            "More files next to the entry point.",
        ),
    ],
};

static TRAINING_PLAN: Shape = Shape {
    name: "TrainingPlan",
    doc: "A SageMaker Flexible Training Plan feeding the group (absent: on-demand).",
    fields: &[
        req("arn", Ty::Str, "The plan's ARN."),
        opt("az_id", Ty::Str, "The zone id of the plan's capacity."),
        opt(
            "reserved_instances",
            Ty::I64,
            "How many instances the plan reserves.",
        ),
    ],
};

static TAINT: Shape = Shape {
    name: "Taint",
    doc: "A Kubernetes taint.",
    fields: &[
        req("key", Ty::Str, "The key."),
        req("value", Ty::Str, "The value."),
        req("effect", Ty::Enum(TaintEffect::NAMES), "The effect."),
    ],
};

static INSTANCE_GROUP: Shape = Shape {
    name: "InstanceGroup",
    doc: "A HyperPod instance group.",
    fields: &[
        req("name", Ty::Str, "The group's name."),
        req("instance_type", Ty::Str, "The `ml.` instance type."),
        opt("count", Ty::I64, "Instances (default 1)."),
        opt("threads_per_core", Ty::I64, "1 or 2."),
        opt("ebs_volume_gb", Ty::I64, "Instance storage volume in GB."),
        opt(
            "deep_health_checks",
            Ty::EnumList(DeepHealthCheck::NAMES),
            "Deep health checks on creation.",
        ),
        opt(
            "training_plan",
            Ty::Obj(&TRAINING_PLAN),
            "The training plan feeding the group (absent: on-demand).",
        ),
        opt("labels", Ty::StrMap, "Kubernetes node labels."),
        opt("taints", Ty::List(&TAINT), "Kubernetes node taints."),
    ],
};

static HYPERPOD: Shape = Shape {
    name: "hyperpod_cluster",
    doc: "A SageMaker HyperPod cluster orchestrated by an EKS cluster.",
    fields: &[
        req("hyperpod_cluster", Ty::Str, "The construct id."),
        req("name", Ty::Str, "The cluster's name."),
        req("eks", Ty::Ref(Want::Eks), "The orchestrating EKS cluster."),
        req(
            "lifecycle",
            Ty::Ref(Want::Lifecycle),
            "The lifecycle scripts run on node creation.",
        ),
        opt(
            "subnets",
            Ty::Refs(Want::Subnets),
            "The nodes' subnets (the HyperPod subnet).",
        ),
        opt(
            "security_groups",
            Ty::Refs(Want::SecurityGroup),
            "The nodes' security groups.",
        ),
        opt(
            "node_recovery",
            Ty::Enum(NodeRecovery::NAMES),
            "Node recovery (default `automatic`).",
        ),
        req(
            "instance_groups",
            Ty::List(&INSTANCE_GROUP),
            "The instance groups.",
        ),
    ],
};

static INFERENCE_OPERATOR: Shape = Shape {
    name: "inference_operator",
    doc: "The HyperPod inference operator (EKS add-on) and its IAM role and TLS bucket.",
    fields: &[
        req("inference_operator", Ty::Str, "The construct id."),
        req("eks", Ty::Ref(Want::Eks), "The EKS cluster."),
        req("hyperpod", Ty::Ref(Want::HyperPod), "The HyperPod cluster."),
        req("vpc", Ty::Ref(Want::Vpc), "The VPC of the load balancers."),
        opt(
            "model_buckets",
            Ty::StrList,
            "Buckets the S3 CSI driver may read models from.",
        ),
    ],
};

static SECRET_REF: Shape = Shape {
    name: "SecretKeyRef",
    doc: "A key of a Kubernetes Secret.",
    fields: &[
        req("name", Ty::Str, "The Secret's name."),
        req("key", Ty::Str, "The key."),
    ],
};

static THROUGHPUT: Shape = Shape {
    name: "StorageThroughput",
    doc: "Storage throughput assumptions for the startup budget.",
    fields: &[
        req(
            "download_bytes_per_sec",
            Ty::F64,
            "Download rate, bytes per second.",
        ),
        req(
            "load_bytes_per_sec",
            Ty::F64,
            "Load rate into GPU memory, bytes per second.",
        ),
        req("warmup_secs", Ty::F64, "Warm-up time, seconds."),
    ],
};

static SERVER: Shape = Shape {
    name: "VllmServer",
    doc: "The vLLM server: the model, the image and the engine's arguments.",
    fields: &[
        req(
            "model",
            Ty::Str,
            "The Hugging Face model id (`organization/name`).",
        ),
        req("image", Ty::Str, "The container image, pinned."),
        opt(
            "served_model_name",
            Ty::Str,
            "The name clients pass as `model`.",
        ),
        opt(
            "tensor_parallel_size",
            Ty::U32,
            "Tensor parallel size (default: every GPU of the instance).",
        ),
        opt(
            "decode_context_parallel_size",
            Ty::U32,
            "Decode context parallel size.",
        ),
        opt(
            "gpu_memory_utilization",
            Ty::F64,
            "Fraction of GPU memory vLLM may use (default 0.90).",
        ),
        opt("max_model_len", Ty::U64, "Maximum context length."),
        opt(
            "load_format",
            Ty::Str,
            "The weight loader (`fastsafetensors`, ...).",
        ),
        opt(
            "trust_remote_code",
            Ty::Bool,
            "Run the model repository's own code.",
        ),
        opt(
            "tool_call_parser",
            Ty::Str,
            "Tool-call parser (enables automatic tool choice).",
        ),
        opt("reasoning_parser", Ty::Str, "Reasoning parser."),
        opt("prefix_caching", Ty::Bool, "Automatic prefix caching."),
        opt("moe_backend", Ty::Str, "The MoE kernel backend."),
        opt(
            "env",
            Ty::StrMap,
            "Environment variables, in order (never secrets).",
        ),
        opt(
            "extra_args",
            Ty::StrList,
            "Arguments the typed fields do not cover.",
        ),
        opt(
            "hf_token_secret",
            Ty::Obj(&SECRET_REF),
            "The Secret holding the Hugging Face token.",
        ),
        opt(
            "weight_bytes",
            Ty::U64,
            "The weights' size, for models not in the catalog.",
        ),
        opt(
            "storage_throughput",
            Ty::Obj(&THROUGHPUT),
            "Storage throughput for the startup budget.",
        ),
    ],
};

static ENDPOINT: Shape = Shape {
    name: "inference_endpoint",
    doc: "An `InferenceEndpointConfig` served by the HyperPod inference operator.",
    fields: &[
        req("inference_endpoint", Ty::Str, "The construct id."),
        req("server", Ty::Obj(&SERVER), "The vLLM server."),
        req(
            "instance_type",
            Ty::Str,
            "The instance type (EC2 or `ml.` name).",
        ),
        opt(
            "name",
            Ty::Str,
            "The object name (default: the served model name in lowercase).",
        ),
        opt("namespace", Ty::Str, "The namespace (default `default`)."),
        opt("replicas", Ty::I64, "Replicas (default 1)."),
    ],
};

static VLLM: Shape = Shape {
    name: "vllm_deployment",
    doc: "A vLLM Deployment and its Service on EKS GPU nodes.",
    fields: &[
        req("vllm_deployment", Ty::Str, "The construct id."),
        req("server", Ty::Obj(&SERVER), "The vLLM server."),
        req(
            "instance_type",
            Ty::Str,
            "The EC2 instance type of the nodes.",
        ),
        opt(
            "name",
            Ty::Str,
            "The object name (default: the served model name in lowercase).",
        ),
        opt(
            "namespace",
            Ty::Str,
            "The namespace (default: the object name).",
        ),
        opt("replicas", Ty::I64, "Replicas (default 1)."),
        opt(
            "gpus",
            Ty::U32,
            "GPUs per replica (default: every GPU of the instance).",
        ),
        opt(
            "exposure",
            Ty::Enum(Exposure::NAMES),
            "How the Service is exposed (default `internal_load_balancer`).",
        ),
        opt(
            "service_annotations",
            Ty::StrMap,
            "Annotations on the Service.",
        ),
        opt("efa", Ty::Bool, "Request the instance's EFA interfaces."),
    ],
};

static SCALING: Shape = Shape {
    name: "Scaling",
    doc: "Node group sizes.",
    fields: &[
        req("min", Ty::I64, "Minimum size."),
        req("desired", Ty::I64, "Desired size."),
        req("max", Ty::I64, "Maximum size."),
    ],
};

static CAPACITY_BLOCK: Shape = Shape {
    name: "CapacityBlock",
    doc: "An EC2 Capacity Block feeding the group (absent: on-demand): an existing reservation, or one the Terraform module buys.",
    fields: &[
        opt(
            "reservation_id",
            Ty::Str,
            "The reservation id (`cr-...`) of a block bought already (required without `purchase`).",
        ),
        req("az_id", Ty::Str, "The block's zone id."),
        opt("instances", Ty::U32, "The block's instance count."),
        opt(
            "purchase",
            Ty::Obj(&CAPACITY_BLOCK_PURCHASE),
            "Buy the block from an offering (Terraform only; charged in full, never refunded).",
        ),
    ],
};

static CAPACITY_BLOCK_PURCHASE: Shape = Shape {
    name: "CapacityBlockPurchase",
    doc: "Buying a Capacity Block: the whole price is charged at purchase; it cannot be cancelled or refunded.",
    fields: &[
        req("offering_id", Ty::Str, "The offering id (`cb-...`, aws ec2 describe-capacity-block-offerings)."),
        opt(
            "acknowledge_non_refundable",
            Ty::Bool,
            "Must be `true`: the purchase is final and not refundable.",
        ),
    ],
};

static NODE_GROUP: Shape = Shape {
    name: "managed_node_group",
    doc:
        "An EKS managed node group: the `system` preset (m7i.xlarge for add-ons) or a `gpu` group.",
    fields: &[
        req("managed_node_group", Ty::Str, "The construct id."),
        req("preset", Ty::Enum(&["system", "gpu"]), "`system` or `gpu`."),
        req("cluster", Ty::Ref(Want::Eks), "The EKS cluster."),
        req("subnets", Ty::Refs(Want::Subnets), "The nodes' subnets."),
        opt(
            "instance_type",
            Ty::Str,
            "The EC2 instance type (required for `gpu`).",
        ),
        opt(
            "capacity_block",
            Ty::Obj(&CAPACITY_BLOCK),
            "The Capacity Block feeding the group (absent: on-demand).",
        ),
        opt("scaling", Ty::Obj(&SCALING), "Sizes."),
        opt(
            "security_groups",
            Ty::Refs(Want::SecurityGroup),
            "Security groups besides the cluster's own.",
        ),
        opt("root_volume_gb", Ty::I64, "Root volume size in GiB."),
        opt("labels", Ty::StrMap, "More node labels."),
        opt(
            "efa",
            Ty::Bool,
            "EFA interfaces on every EFA-capable network card.",
        ),
    ],
};

static LBC: Shape = Shape {
    name: "load_balancer_controller",
    doc: "The AWS Load Balancer Controller's IAM role, bound by EKS Pod Identity.",
    fields: &[
        req("load_balancer_controller", Ty::Str, "The construct id."),
        req("cluster", Ty::Ref(Want::Eks), "The EKS cluster."),
    ],
};

static KARPENTER: Shape = Shape {
    name: "karpenter",
    doc: "Karpenter's controller and node roles.",
    fields: &[
        req("karpenter", Ty::Str, "The construct id."),
        req("cluster", Ty::Ref(Want::Eks), "The EKS cluster."),
    ],
};

static NODE_POOL: Shape = Shape {
    name: "karpenter_node_pool",
    doc: "A Karpenter EC2NodeClass and NodePool fed by a Capacity Block.",
    fields: &[
        req("karpenter_node_pool", Ty::Str, "The construct id."),
        req("name", Ty::Str, "The pool's Kubernetes name."),
        req(
            "karpenter",
            Ty::Ref(Want::Karpenter),
            "The Karpenter construct.",
        ),
        req("instance_type", Ty::Str, "The EC2 instance type."),
        opt(
            "reservation_id",
            Ty::Str,
            "Select the Capacity Block by id.",
        ),
        opt(
            "reservation_tags",
            Ty::StrMap,
            "Select the Capacity Block by tags.",
        ),
        opt("max_nodes", Ty::U32, "At most this many nodes (default 1)."),
    ],
};

static DATA_REPOSITORY: Shape = Shape {
    name: "DataRepository",
    doc: "A link between a directory of the file system and a bucket prefix, importing new, changed and deleted objects.",
    fields: &[
        req("bucket", Ty::Ref(Want::Bucket), "The bucket."),
        req(
            "prefix",
            Ty::Str,
            "The key prefix in the bucket (`models/`; empty for the whole bucket).",
        ),
        req(
            "file_system_path",
            Ty::Str,
            "The directory on the file system (`/models`).",
        ),
    ],
};

static FSX_LUSTRE: Shape = Shape {
    name: "fsx_lustre",
    doc: "An FSx for Lustre file system (PERSISTENT_2, LZ4, Lustre 2.15, encrypted), optionally linked to a bucket.",
    fields: &[
        req("fsx_lustre", Ty::Str, "The construct id."),
        req("subnet", Ty::Ref(Want::Subnet), "The file system's subnet."),
        req(
            "security_group",
            Ty::Ref(Want::SecurityGroup),
            "The security group of its network interfaces (Lustre ports open within it).",
        ),
        opt(
            "deployment_type",
            Ty::Enum(&["PERSISTENT_2"]),
            "The deployment type (default `PERSISTENT_2`).",
        ),
        opt(
            "storage_gib",
            Ty::U32,
            "Storage capacity in GiB: 1200 or a multiple of 2400 (default 1200).",
        ),
        opt(
            "throughput_per_tib",
            Ty::U32,
            "MB/s per TiB of storage: 125, 250, 500 or 1000 (default 125).",
        ),
        opt(
            "compression",
            Ty::Enum(&["lz4", "none"]),
            "Data compression (default `lz4`).",
        ),
        opt(
            "data_repository",
            Ty::Obj(&DATA_REPOSITORY),
            "The link to S3.",
        ),
    ],
};

/// Every construct shape; the construct's kind is the key holding its id.
pub const CONSTRUCTS: &[&Shape] = &[
    &NETWORK,
    &SECURITY_GROUP,
    &EKS,
    &LIFECYCLE,
    &HYPERPOD,
    &INFERENCE_OPERATOR,
    &ENDPOINT,
    &VLLM,
    &NODE_GROUP,
    &LBC,
    &KARPENTER,
    &NODE_POOL,
    &FSX_LUSTRE,
];

/// Every shape reachable from the top, for `$defs`.
fn collect(shape: &'static Shape, out: &mut Vec<&'static Shape>) {
    if out.iter().any(|s| std::ptr::eq(*s, shape)) {
        return;
    }
    out.push(shape);
    for f in shape.fields {
        match f.ty {
            Ty::Obj(s) | Ty::List(s) => collect(s, out),
            _ => {}
        }
    }
}

fn def_name(shape: &Shape) -> String {
    // Construct kinds are snake_case; give them PascalCase definitions.
    shape
        .name
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn reference_schema(want: Want) -> Value {
    json!({
        "type": "string",
        "pattern": "^[A-Za-z][A-Za-z0-9]*(\\.[a-z_]+)?$",
        "description": format!("A reference by construct id to {}.", want.describe()),
    })
}

fn ty_schema(ty: Ty) -> Value {
    match ty {
        Ty::Str => json!({"type": ["string", "number", "boolean"]}),
        Ty::U32 => json!({"type": "integer", "minimum": 0, "maximum": u32::MAX}),
        Ty::U64 => json!({"type": "integer", "minimum": 0}),
        Ty::I64 => json!({"type": "integer"}),
        Ty::F64 => json!({"type": "number"}),
        Ty::Bool => json!({"type": "boolean"}),
        Ty::Enum(values) => json!({"enum": values}),
        Ty::StrMap => json!({
            "type": "object",
            "additionalProperties": {"type": ["string", "number", "boolean"]}
        }),
        Ty::StrList => json!({"type": "array", "items": {"type": ["string", "number", "boolean"]}}),
        Ty::EnumList(values) => json!({"type": "array", "items": {"enum": values}}),
        Ty::Ref(want) => reference_schema(want),
        Ty::Refs(want) => json!({
            "anyOf": [reference_schema(want), {"type": "array", "items": reference_schema(want)}]
        }),
        Ty::Obj(s) => json!({"$ref": format!("#/$defs/{}", def_name(s))}),
        Ty::List(s) => {
            json!({"type": "array", "items": {"$ref": format!("#/$defs/{}", def_name(s))}})
        }
        Ty::Constructs => json!({"type": "array", "items": {"$ref": "#/$defs/Construct"}}),
        Ty::Stages => json!({"type": "array", "items": {"$ref": "#/$defs/Stage"}}),
    }
}

fn object_schema(shape: &Shape, kind_const: Option<&str>) -> Value {
    let mut props = Map::new();
    for f in shape.fields {
        let mut s = ty_schema(f.ty);
        if let (Some(k), "kind") = (kind_const, f.name) {
            s = json!({"const": k});
        }
        if let Value::Object(m) = &mut s {
            m.entry("description")
                .or_insert_with(|| Value::String(f.doc.to_owned()));
        }
        props.insert(f.name.to_owned(), s);
    }
    let required: Vec<&str> = shape
        .fields
        .iter()
        .filter(|f| f.required)
        .map(|f| f.name)
        .collect();
    json!({
        "type": "object",
        "description": shape.doc,
        "properties": props,
        "required": required,
        "additionalProperties": false,
    })
}

/// The JSON Schema (draft 2020-12) of the format.
pub fn json_schema() -> Value {
    let mut shapes = Vec::new();
    for s in CONSTRUCTS {
        collect(s, &mut shapes);
    }
    for (_, s) in STAGE_KINDS {
        collect(s, &mut shapes);
    }
    let mut defs = Map::new();
    for s in &shapes {
        if STAGE_KINDS.iter().any(|(_, k)| std::ptr::eq(*k, *s)) {
            continue;
        }
        defs.insert(def_name(s), object_schema(s, None));
    }
    let stages: Vec<Value> = [
        ("cloudformation", &CONSTRUCT_STAGE),
        ("kubernetes", &CONSTRUCT_STAGE),
        ("helm", &HELM_STAGE),
        ("upload", &UPLOAD_STAGE),
    ]
    .iter()
    .map(|(kind, s)| object_schema(s, Some(kind)))
    .collect();
    defs.insert(
        "Stage".to_owned(),
        json!({"description": "A deployment stage; `kind` says which tool deploys it.", "oneOf": stages}),
    );
    let constructs: Vec<Value> = CONSTRUCTS
        .iter()
        .map(|s| json!({"$ref": format!("#/$defs/{}", def_name(s))}))
        .collect();
    defs.insert(
        "Construct".to_owned(),
        json!({"description": "A construct: the key naming its kind holds its id (`network: Network`).", "oneOf": constructs}),
    );
    let mut top = object_schema(&FILE, None);
    if let Value::Object(m) = &mut top {
        let mut head = Map::new();
        head.insert(
            "$schema".to_owned(),
            json!("https://json-schema.org/draft/2020-12/schema"),
        );
        head.insert(
            "$id".to_owned(),
            json!("https://hyperforge.dev/stack-file.schema.json"),
        );
        head.insert("title".to_owned(), json!("hyperforge stack file"));
        head.extend(std::mem::take(m));
        head.insert("$defs".to_owned(), Value::Object(defs));
        *m = head;
    }
    top
}
