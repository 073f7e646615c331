//! Diagnostics: every problem found in a description, with a stable code, the construct path it
//! belongs to, a message carrying the numbers, and a help line. Validation collects all of them
//! in one run; synthesis refuses to write anything while an error stands.

use serde::Serialize;
use std::fmt;

mod sources;

/// How bad a diagnostic is. Errors stop synthesis; warnings do not unless denied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Severity {
    /// The description cannot be deployed as written.
    Error,
    /// The description deploys, but probably not as intended.
    Warning,
    /// The description deploys as written; how it is deployed follows from it (the manifest
    /// records it and the runbook and `hyperforge deploy` act on it). Never denied.
    Note,
}

impl Severity {
    /// The word the diagnostics and the reference use (`error`, `warning`, `note`).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

macro_rules! codes {
    ($( $variant:ident = $id:literal, $severity:ident, $summary:literal, $explanation:literal; )*) => {
        /// A stable diagnostic code. The identifier (`HF0101`, ...) never changes meaning once
        /// released; [`Code::explanation`] documents each one.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum Code {
            $( #[doc = concat!("`", $id, "` (", stringify!($severity), "): ", $summary, ".")] $variant, )*
        }

        impl Code {
            /// Every code, in identifier order.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The stable identifier, e.g. `HF0101`.
            pub fn id(self) -> &'static str {
                match self { $(Code::$variant => $id,)* }
            }

            /// The variant's name in Rust (`OversizedInstance` of `HF0505`): what
            /// `Stack::acknowledge` and `Diagnostics::with_code` take as `Code::...`.
            pub fn rust_name(self) -> &'static str {
                match self { $(Code::$variant => stringify!($variant),)* }
            }

            /// The severity this code is reported with.
            pub fn severity(self) -> Severity {
                match self { $(Code::$variant => Severity::$severity,)* }
            }

            /// One line saying what the code means.
            pub fn summary(self) -> &'static str {
                match self { $(Code::$variant => $summary,)* }
            }

            /// The long documentation of the code: why it matters and how to fix it.
            pub fn explanation(self) -> &'static str {
                match self { $(Code::$variant => $explanation,)* }
            }

            /// Looks a code up by its identifier (case-insensitive).
            pub fn from_id(id: &str) -> Option<Code> {
                Code::ALL.iter().copied().find(|c| c.id().eq_ignore_ascii_case(id))
            }
        }
    };
}

codes! {
    InvalidConstructId = "HF0001", Error, "construct id is not a valid identifier",
        "Construct ids become CloudFormation logical ids and Terraform resource names. They must start with an ASCII letter and contain only ASCII letters and digits, at most 64 characters.";
    LogicalIdCollision = "HF0002", Error, "two constructs derive the same logical id",
        "Logical ids are derived from construct paths (`Network/Vpc` -> `NetworkVpc`). Two paths that derive the same id would make one resource silently replace the other, so this is an error; rename one of the constructs.";
    UnknownReference = "HF0003", Error, "a reference points at a construct that is not in this stack",
        "Typed handles are only valid in the stack that created them. Add the referenced construct to the same stack, or pass the value in as a parameter.";
    ReferenceToLaterStage = "HF0004", Error, "a construct refers to a resource created in a later stage",
        "Stages deploy in order; a stage can only use what earlier stages (or itself) created. Move the referenced construct to an earlier stage.";
    UnknownOverrideTarget = "HF0005", Error, "a raw property override names a resource that does not exist",
        "`Stack::override_property` takes the construct path of an emitted resource (as listed by the synthesized template's `Metadata.hyperforge:path`). Check the path for typos. The same code reports a property path that cannot be applied to the resource as emitted: a numeric segment past the end of a list (append with a last segment `-`), or a segment below a value that is not an object or list.";
    InvalidStackName = "HF0006", Error, "stack or stage name is not valid",
        "Stack and stage names form CloudFormation stack names: 1-128 characters, starting with a letter, letters, digits and hyphens only. The combined `<stack>-<stage>` name must fit too.";
    DuplicateStage = "HF0007", Error, "two stages share a name",
        "Stage names must be unique within a stack; they name CloudFormation stacks and artifact files.";
    EmptyStage = "HF0008", Warning, "a stage has nothing in it",
        "A stage without constructs produces an empty artifact. Remove the stage or add constructs to it.";
    InvalidRegion = "HF0009", Error, "region is not a known AWS region",
        "Regions are written like `us-west-2`. The instance catalog lists which regions offer each instance type.";
    InvalidTag = "HF0010", Error, "tag key or value is not valid",
        "Tag keys are 1-128 characters and values 0-256 characters; keys may not start with `aws:`.";
    ReservedTagKey = "HF0385", Error, "a tag key is one that EKS, Karpenter or the Load Balancer Controller sets on the cluster's resources",
        "App and stack tags reach every taggable resource, the GPU instances, their volumes and network interfaces included, Karpenter's EC2NodeClass and the Load Balancer Controller's `defaultTags`. Karpenter's EC2NodeClass refuses the keys it sets itself (`karpenter.sh/nodepool`, `karpenter.sh/nodeclaim`, `karpenter.k8s.aws/ec2nodeclass`, `eks:eks-cluster-name`, any `kubernetes.io/cluster/...`), the Load Balancer Controller tracks the resources it creates by its own `elbv2.k8s.aws/...`, `service.k8s.aws/...` and `ingress.k8s.aws/...` tags, and EKS and the Load Balancer Controller recognise a cluster's instances, subnets and security groups by `kubernetes.io/cluster/<name>`: a tag on every resource with one of these keys would claim resources for the wrong owner or be refused. Use another key.";
    InvalidNodeLabelsOrTaints = "HF0387", Error, "a HyperPod instance group's labels or taints are not what HyperPod accepts",
        "HyperPod applies an instance group's Kubernetes labels and taints (`KubernetesConfig`) to every node it launches in the group: at most 50 labels and 50 taints a group, with Kubernetes label syntax (keys `[prefix/]name`, the name and the value at most 63 letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit; taint values the same, taint keys like label keys). hyperforge keeps one label for itself, `hyperforge.io/instance-group`, set on a group a drain cordons (see the reservation timeline), so a group takes at most 49 labels of its own and never that key.";
    TooManyTags = "HF0386", Error, "the tags exceed what EC2 accepts on one resource",
        "EC2 accepts 50 tags per resource (keys starting with `aws:` do not count). The GPU instances carry the app's and the stack's tags, `hyperforge:stack`, and up to six keys EKS or Karpenter add (`Name`, `karpenter.sh/nodepool`, `karpenter.sh/nodeclaim`, `karpenter.k8s.aws/ec2nodeclass`, `kubernetes.io/cluster/<name>`, `eks:eks-cluster-name`), so an instance launch with more would fail. Keep at most 43 app and stack tags together (44 with `hyperforge:stack`; one more when they set `Name` themselves).";
    DescriptionTooLong = "HF0012", Error, "the stack description is longer than CloudFormation accepts",
        "The description is written into every template, and CloudFormation accepts at most 1,024 bytes there.";
    ConstructInWrongStage = "HF0014", Error, "a construct is placed in a stage that cannot deploy it",
        "Constructs that create AWS resources go in CloudFormation stages, and constructs that create Kubernetes objects in Kubernetes stages; Helm and upload stages hold no constructs, and a stage id is valid only in the stack that created it. Anything else would be left out of every artifact without a word. Add the construct to a stage of the right kind of the same stack.";
    NoStages = "HF0013", Error, "a stack has no stages",
        "A stack deploys its stages in order; one without any would synthesize nothing. Add a stage, or leave the stack out.";
    InvalidFileName = "HF0011", Error, "a file name is not a plain, unique file name",
        "Files a stack uploads become artifact paths and S3 keys. Their names are 1-255 letters, digits, `.`, `_` and `-`, start with a letter or digit, hold no `/` or `..`, and are unique within their upload.";
    UserConstruct = "HF0015", Error, "a construct of the describing program's own reports a problem",
        "Constructs a program defines itself (implementing `Construct`) report their own rules with this code, at their construct path; the message and help are theirs.";
    SharedClusterObject = "HF0016", Error, "two stacks would create the same object in one cluster",
        "Stacks of one app that deploy onto the same EKS cluster (one of them, at least, importing it: an imported cluster shared by teams, say) must not both create an object the cluster holds once: an EKS Pod Identity association (one per namespace and service account; the second stack's deployment fails) or a Kubernetes object of the same kind, namespace and name (the second apply overwrites the first, or fails on an immutable Job). Namespaces are shared freely. Give one stack's objects names of their own (for the weights stager, `ModelStore::stager(namespace, service_account)`), or let one stack create what both use.";
    AcknowledgedError = "HF0017", Error, "an acknowledgement names an error, or gives no reason",
        "`Stack::acknowledge` accepts a warning or note a reviewer decided to live with, at one construct path, with the reason written beside it. Errors cannot be acknowledged: the output would not deploy or would not do what it says. An acknowledgement without a reason is refused too.";
    UnusedAcknowledgement = "HF0018", Warning, "an acknowledgement matches no diagnostic",
        "An acknowledged code at a construct path that reports nothing there is stale (the problem was fixed, or the path renamed). Remove it, so that it cannot hide a later warning unseen.";
    InvalidRawResource = "HF0030", Error, "a raw resource or Kubernetes object is malformed",
        "A `RawResource` names a CloudFormation type `Service::Namespace::Type` (`AWS::SQS::Queue`) with an object of properties, and a Terraform resource type in snake case with a provider prefix (`aws_sqs_queue`) with an object body. A `KubernetesManifest` is one object with `apiVersion`, `kind` and `metadata.name` (a DNS-1123 name), and `metadata.namespace` when given. Fix the value shown.";
    RawResourceLacksFormat = "HF0031", Warning, "a raw resource has no form for a format the stack emits",
        "A raw resource given only as CloudFormation is missing from the Terraform root module (and the reverse), so the two would deploy different infrastructure. Give it both forms (`RawResource::cloudformation` and `RawResource::terraform`), or synthesize only the format it has (`Formats`).";
    MissingRequiredProperty = "HF0032", Error, "a raw resource lacks a property its type requires",
        "A raw resource of a type whose schema is vendored (the CloudFormation registry schemas in `codegen/schemas/cloudformation/`, the committed Terraform provider schemas) is checked as an override is (`HF0020` for a name the type does not have, with a suggestion; `HF0021` for a value of the wrong type), and must give every property the type requires: CloudFormation or Terraform would refuse it at deployment. Types hyperforge vendors no schema for are not checked.";
    CustomResourceNotServed = "HF0033", Error, "a custom resource's API version or kind is not one its pinned controller serves",
        "A Kubernetes object of a group whose CustomResourceDefinition hyperforge vendors (Karpenter's `karpenter.sh` and `karpenter.k8s.aws` of the chart `HelmRelease::karpenter` installs, KEDA's `keda.sh`, the HyperPod Inference Operator's `inference.sagemaker.aws.amazon.com`; the table `resources::kubernetes::crd::SERVED`, generated from `codegen/schemas/crds/`) must name a kind that CRD defines and a version it serves: the API server refuses any other (`no matches for kind ... in version ...`) when the stage is applied, after the stages before it. Use the version the help names, and the object's fields as that version defines them.";
    OverrideUnknownProperty = "HF0020", Error, "an override or a raw resource names a property the resource type does not have",
        "`Stack::override_property` and `Stack::override_terraform` are checked against the vendored schemas: the CloudFormation registry schema of the resource's type (`codegen/schemas/cloudformation/`, compiled into a table of property shapes) and the committed Terraform provider schemas. Every segment of the dotted path, and every key of an object value, must be a property (or attribute, or nested block) of the type at that depth; numeric segments index lists, `-` appends to one. A typo would otherwise reach CloudFormation or Terraform and fail there, after deployment started.";
    OverrideWrongType = "HF0021", Error, "an override's or a raw resource's value is not of the type the property takes",
        "The value of an override must have the JSON type the schema gives the property: a string, number, integer, boolean, list or object. As CloudFormation and Terraform do, numbers and booleans are accepted where a string is expected and numeric strings where a number is; CloudFormation intrinsic functions (`Ref`, `Fn::...`) and Terraform `${...}` interpolations are accepted anywhere.";
    OverrideOfValidatedProperty = "HF0022", Warning, "an override changes a property hyperforge's rules checked",
        "Rules check some properties against each other and against the catalog: a node group's capacity type, instance types, subnets and scaling, a launch template's market options and capacity reservation, a HyperPod instance group's type, count and training plan, a subnet's zone. An override is applied after those checks, so the value it writes is one no rule has seen. Prefer the builder's own setting; keep the override only if you mean to bypass the check.";
    OverrideCloudFormationOnly = "HF0023", Warning, "a CloudFormation override has no Terraform counterpart",
        "`Stack::override_property` changes the CloudFormation template only. When the Terraform module is also written, the two formats then deploy different things. Add the same change with `Stack::override_terraform` (in Terraform's attribute names), or emit only the CloudFormation format.";
    UnknownTerraformOverrideTarget = "HF0024", Error, "a Terraform override names no single Terraform resource",
        "`Stack::override_terraform` takes the construct path of a resource lowered to Terraform. One path may become several Terraform resources (a bucket becomes the bucket and its encryption, versioning, public access block and policy): name the Terraform type (`override_terraform_type`) when it does. Check the path and type for typos.";
    UnknownPatchTarget = "HF0025", Error, "a Kubernetes patch names no object",
        "`Stack::patch_object` takes the construct path of a Kubernetes object of a Kubernetes stage: the construct's id and the object's kind (`Workload/Deployment`).";
    PatchFailed = "HF0026", Error, "a Kubernetes patch does not apply",
        "A JSON patch (RFC 6902) applies its operations in order and fails at the first that cannot apply: a path that does not exist (for `remove`, `replace`, `test`, or the parent of an `add`), an index past the end of a list, a `test` whose value differs, or a malformed operation. A merge patch (RFC 7386) must be a JSON object. Nothing of a failing patch is applied.";
    PatchChangesIdentity = "HF0027", Error, "a Kubernetes patch changes an object's identity",
        "Objects are referred to by `apiVersion`, `kind`, `metadata.name` and `metadata.namespace`: the runbook waits for Jobs by name, other objects name Services and ServiceAccounts, and `kubectl apply` would create a second object instead of changing the first. A patch may not change them; change the construct instead.";
    InvalidCidr = "HF0101", Error, "CIDR block is malformed",
        "IPv4 CIDR blocks are written `a.b.c.d/n` with the host bits zero, e.g. `10.192.0.0/16`.";
    CidrOutOfRange = "HF0102", Error, "CIDR block size is outside what AWS accepts",
        "VPC and secondary VPC CIDR blocks must be between /16 and /28. Subnets need room for their hosts: the planned subnets must fit inside the block.";
    CidrOverlap = "HF0103", Error, "CIDR blocks overlap",
        "The secondary CIDR block of the VPC must not overlap the primary block.";
    TooFewAvailabilityZones = "HF0104", Error, "fewer availability zones than required",
        "EKS needs subnets in at least two availability zones for its control plane. Use `availability_zones(2)` or more.";
    InvalidAvailabilityZoneId = "HF0105", Error, "availability zone id is malformed",
        "Availability Zone ids look like `usw2-az2`: a region code, `-az`, and a number. They are the same in every account, unlike zone names such as `us-west-2a`; capacity reservations and training plans report the id.";
    AvailabilityZoneIdWrongRegion = "HF0106", Error, "availability zone id belongs to another region",
        "The zone id's prefix names its region (`usw2` is us-west-2). A subnet can only be placed in a zone of the stack's region.";
    InvalidLogRetention = "HF0107", Error, "log retention is not a CloudWatch Logs retention period",
        "CloudWatch Logs accepts 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653 days.";
    TooManyAvailabilityZones = "HF0108", Error, "more availability zones than the region has",
        "A network spreads its public and private subnets over distinct zones of its region, each placed by zone id: at most as many as the region has where every account can create an EKS cluster's subnets (two in us-west-1, five in us-east-1, where EKS refuses use1-az3), and never more than 6, the most any region has.";
    InvalidName = "HF0201", Error, "resource name is malformed or too long",
        "Names must satisfy the service's rules: EKS cluster names 1-100 characters `[0-9A-Za-z][A-Za-z0-9-_]*`; HyperPod cluster and instance group names 1-63 characters `[a-zA-Z0-9](-*[a-zA-Z0-9])*`; S3 bucket name prefixes lowercase letters, digits and hyphens.";
    UnsupportedKubernetesVersion = "HF0202", Error, "Kubernetes version is not supported",
        "EKS versions are written `1.NN`. HyperPod supports the versions listed in its prerequisites; hyperforge accepts 1.30 to 1.34.";
    InvalidAccessEntry = "HF0203", Error, "access entry principal is malformed",
        "Access entry principals are IAM role or user ARNs: `arn:aws:iam::<12-digit account>:role/<name>`.";
    AdminHostWithoutVpc = "HF0204", Error, "the admin host has no VPC",
        "The SSM-managed admin host that reaches the private API endpoint needs the cluster's VPC for its security group: the VPC of the network the cluster's subnets belong to, or the one given with `.vpc(&network.vpc)` (stack file: `vpc:`). If you reach the VPC another way (VPN, Direct Connect, a runner inside it), say so with `.without_admin_host()` (stack file: `admin_host: false`).";
    PrivateApiWithoutAdminPath = "HF0205", Warning, "the private API endpoint has no admin path",
        "The endpoint is private and no admin host is created, so kubectl, helm and the Terraform Helm provider work only from inside the VPC. Keep the default admin host, or make sure your own path (VPN, Direct Connect, an in-VPC runner) reaches TCP 443 of the cluster security group.";
    InvalidAdminHostInstanceType = "HF0206", Error, "admin host instance type is malformed",
        "Write an EC2 instance type such as `t3.micro`: a family, a dot and a size, lowercase letters, digits and hyphens.";
    AdminHostVpcMismatch = "HF0207", Error, "the admin host's VPC is not the VPC of the cluster's subnets",
        "The admin host's security group is created in the cluster's `vpc` and the host in the first control-plane subnet; both must belong to the same network. Pass the network whose private subnets the cluster uses: `.subnets(&network.private_subnets).vpc(&network.vpc)`.";
    InvalidModelBucketName = "HF0209", Error, "a model bucket is not an S3 bucket name",
        "Name each bucket the S3 CSI driver may read by its bucket name: 3-63 lowercase letters, digits, `.` and `-`, starting and ending with a letter or digit, no `..`, not an IP address, no ARN, wildcard or path.";
    MalformedTrainingPlanArn = "HF0301", Error, "training plan ARN is malformed",
        "Training plan ARNs look like `arn:aws:sagemaker:<region>:<12-digit account>:training-plan/<name>`, 50 to 2048 characters. Copy it from `aws sagemaker describe-training-plan`.";
    TrainingPlanWithoutAvailabilityZone = "HF0302", Error, "training plan capacity has no availability zone id",
        "A training plan's capacity lives in one availability zone; the instance group's subnet must be placed there. Give the zone id with the plan (`Capacity::training_plan(arn, \"usw2-az2\")`).";
    UnknownInstanceType = "HF0303", Error, "instance type is not in the catalog",
        "hyperforge only deploys instance types whose GPU count, memory and network layout it knows. See `hyperforge::catalog::instances()` for the list, or add the type to the catalog.";
    InstanceTypeNotInRegion = "HF0304", Error, "instance type is not offered in the stack's region",
        "The catalog's regional table lists where each type is offered (for HyperPod: the `ml.` name). Deploy to one of the listed regions or choose another type.";
    InvalidInstanceCount = "HF0305", Error, "instance count is out of range",
        "HyperPod instance groups take 0 to 6758 instances; a group serving a model needs at least one.";
    InvalidThreadsPerCore = "HF0306", Error, "threads per core must be 1 or 2",
        "HyperPod instance groups take `ThreadsPerCore` 1 (multithreading off) or 2 (on).";
    InvalidVolumeSize = "HF0307", Error, "EBS volume size is out of range",
        "HyperPod instance storage volumes are 1 to 16384 GB.";
    TrainingPlanRegionMismatch = "HF0308", Error, "training plan is in another region",
        "A training plan can only feed a cluster in its own region: the ARN's region must be the stack's region.";
    NoInstanceGroups = "HF0309", Error, "HyperPod cluster has no instance groups",
        "Add at least one instance group with `HyperPodCluster::instance_group`.";
    DuplicateInstanceGroup = "HF0310", Error, "two instance groups share a name",
        "Instance group names must be unique within a HyperPod cluster.";
    HyperPodBeforeDependencies = "HF0311", Error, "the HyperPod cluster is created before the HyperPod dependencies chart",
        "HyperPod's CreateCluster requires the `hyperpod-dependencies` Helm chart on the EKS cluster. Add a Helm stage installing it (`HelmRelease::hyperpod_dependencies`) before the stage that creates the cluster.";
    LifecycleScriptsInSameStage = "HF0312", Error, "lifecycle scripts are uploaded after the cluster that needs them",
        "The lifecycle script bucket must be created, and the scripts uploaded, in stages before the HyperPod cluster's stage.";
    TrainingPlanZoneMismatch = "HF0313", Error, "training plan capacity and the cluster's subnet are in different zones",
        "A training plan's reserved capacity lives in one availability zone; HyperPod can only launch it into a subnet of that zone. Place the HyperPod subnet in the plan's zone id.";
    InstanceCountAboveReserved = "HF0314", Error, "instance group asks for more instances than its training plan reserves",
        "A training plan reserves a fixed number of instances (`TotalInstanceCount` in `aws sagemaker describe-training-plan`). Instances beyond it are not covered by the plan and the group cannot reach its count. Lower the group's count or buy a plan with more instances.";
    InvalidReservedInstanceCount = "HF0315", Error, "reserved instance count is not a purchasable quantity",
        "Training plans and EC2 Capacity Blocks are sold in quantities of 1, 2, 4, 8, 16, 32 or 64 instances (64 not for every type and region). A reservation of any other size cannot exist; check the count you copied from the plan or block.";
    MalformedCapacityReservationId = "HF0320", Error, "capacity reservation id is malformed",
        "Capacity Block reservation ids look like `cr-0123456789abcdef0`; `aws ec2 describe-capacity-reservations` lists them.";
    CapacityBlockSubnetZone = "HF0321", Error, "a node group on a Capacity Block or capacity reservation has a subnet outside its zone",
        "A Capacity Block, like an On-Demand Capacity Reservation, is a capacity reservation in one availability zone; instances cannot launch into it from a subnet of another zone (EC2 answers \"The following supplied instance types do not exist\"). Give the group only the network's GPU subnet, placed by the reservation's zone id.";
    GpuAmiRequired = "HF0322", Error, "a GPU instance type runs an AMI without the NVIDIA driver",
        "GPU nodes need the EKS-optimized accelerated AMI (`AL2023_x86_64_NVIDIA`). `ManagedNodeGroup::gpu` selects it.";
    InvalidScaling = "HF0323", Error, "node group sizes are not ordered",
        "EKS requires 0 <= min <= desired <= max and max >= 1. A Capacity Block group may stay at desired 0 until the block is active.";
    EfaUnsupported = "HF0324", Error, "EFA requested on an instance type without EFA",
        "Only instance types with EFA interfaces (see the catalog's `efa_max`) can attach them.";
    GroupLargerThanReservation = "HF0326", Error, "the group can grow beyond its reservation",
        "Instances beyond a Capacity Block's size fail to launch for as long as the block runs; cap the group's maximum at the block's instance count.";
    InvalidAmiVersion = "HF0328", Error, "the AMI release is not an EKS-optimized AMI release name",
        "Karpenter's `al2023@<version>` alias takes an EKS-optimized AMI release, `v` and its date (`v20260714`): the releases are listed in the amazon-eks-ami repository's CHANGELOG. `latest` is refused: a new AMI would mark every node drifted.";
    CapacityBlockPurchaseWithoutOptIn = "HF0327", Error, "a Capacity Block purchase without the explicit opt-in",
        "Buying a Capacity Block charges its whole price up front; it cannot be cancelled or refunded, and destroying the Terraform resource only forgets it. hyperforge emits the purchase only after `purchase_capacity_block_non_refundable()`.";
    InvalidCapacityEndTime = "HF0329", Error, "capacity end time is malformed or out of range",
        "A capacity-end warning needs the end of the Capacity Block or training plan as RFC 3339 in UTC (`2027-01-31T11:30:00Z`; fractional seconds and `+00:00` are accepted, other offsets are not), a real calendar date and time of day, in 2024 to 2199, and far enough after 2024 that the warning's lead still falls in that range. Synthesis has no clock, so an end that has already passed but lies in that range is not caught: take the date from `aws ec2 describe-capacity-reservations` (`EndDate`) or `aws sagemaker describe-training-plan` (`EndTime`).";
    InvalidCapacityWarningLead = "HF0330", Error, "capacity-end warning lead time is out of range",
        "The scheduled warning is sent `lead_hours` before the capacity ends: at least 1 hour (EC2 itself warns 40 minutes before a Capacity Block ends) and at most 720 hours (30 days).";
    InvalidReservationWindow = "HF0331", Error, "a reservation's window is not a span of time in UTC",
        "A reservation's `start` and `end` are RFC 3339 times in UTC (`2026-12-17T11:30:00Z`, as `aws ec2 describe-capacity-reservations` shows `StartDate` and `EndDate`), the end after the start. The window drives the reservation's timeline: when its nodes come, when the endpoint serves, when it must be drained.";
    CapacityBlockEndTime = "HF0332", Error, "a Capacity Block does not end at 11:30 UTC",
        "\"All Capacity Blocks end at 11:30AM UTC\" (EC2 User Guide, \"Find and purchase Capacity Blocks\"); only the start may fall at another time. An end at another minute is a typing mistake or another time zone: copy `EndDate` from `aws ec2 describe-capacity-reservations`.";
    CapacityBlockDuration = "HF0333", Error, "a Capacity Block's duration is not one EC2 sells",
        "Capacity Blocks last \"1-day increments up to 14 days, and in 7-day increments up to 182 days\" (EC2 User Guide, \"Find and purchase Capacity Blocks\"); a block starting at another time than 11:30 UTC has a shorter or longer first day, so the duration is counted to the nearest day.";
    InvalidUpfrontFee = "HF0334", Error, "a reservation's upfront fee is not a price",
        "The upfront fee is what the reservation cost, in USD, as its offering's `UpfrontFee` says (`aws ec2 describe-capacity-block-offerings`): a number from 0 to a billion. `hyperforge cost` divides it over the window to show what the minutes that serve nothing cost.";
    DrainAfterScaleDown = "HF0335", Error, "a reservation's drain time is later than the service's termination lead allows",
        "A Capacity Block's drain time (`drain_by`) is when the endpoint stops taking requests and its nodes are scaled to zero. EKS scales a Capacity Block's managed node group to zero itself 40 minutes before the block ends (EKS User Guide, \"Create a managed node group with Capacity Blocks for ML\"; Karpenter drains its nodes then too), and EC2 begins terminating the instances 30 minutes before the end (EC2 User Guide, \"How Capacity Blocks work\"). The servers need their termination grace to finish the requests they hold, so the drain must come that grace before EKS's scale-down at the latest (the default when no drain time is given), and after the block opens. On a training plan, SageMaker begins terminating the plan's instances 30 minutes before its end (SageMaker AI Developer Guide, \"Training plans utilization for SageMaker training jobs\") and HyperPod scales nothing down before that, so the drain must come the servers' grace before those 30 minutes.";
    TrainingPlanDuration = "HF0336", Error, "a training plan's duration is not one SageMaker sells",
        "Training plans last \"1-day increments from 1 to 182 days\" (SageMaker AI Developer Guide, \"Search training plan offerings\"); the duration is counted to the nearest day. Copy `StartTime` and `EndTime` from `aws sagemaker describe-training-plan`.";
    DuplicateLogShipping = "HF0350", Error, "two log shippings create the same log groups",
        "A `LogShipping` names its log groups after its EKS cluster (`/hyperforge/<cluster>/workloads` and `/hyperforge/<cluster>/system`), so a second one for the same cluster would create groups that exist already and fail to deploy. Keep one per cluster.";
    FluentBitBeforeLogGroups = "HF0351", Error, "Fluent Bit is installed before the log groups it writes to",
        "The `aws-for-fluent-bit` chart never creates a log group and its role comes with the `LogShipping` of the same cluster; installed in an earlier stage, it would find neither the groups nor its permissions and drop the logs. Place the Helm stage after the stage holding the `LogShipping`.";
    MonitoringWithoutSubnets = "HF0340", Error, "the managed Prometheus collector has no subnets",
        "An AWS managed collector (`AWS::APS::Scraper`) runs network interfaces in the cluster's VPC to reach the pods it scrapes; it needs the subnets to put them in. Name the cluster's private subnets, in at least two Availability Zones.";
    InvalidAlertThreshold = "HF0341", Error, "an alert threshold is out of range",
        "The p99 time to first token alerted on must be above 0 and at most 600 seconds, and the queue depth at least 1 and at most 100000 waiting requests: a threshold outside these never fires or always does.";
    AutoscalingAboveCapacity = "HF0360", Error, "autoscaling can ask for more GPUs than the capacity can ever provide",
        "The most replicas autoscaling may ask for, times the GPUs each replica takes, must fit the GPUs the capacity claims serving the model can ever provide: the instances a Capacity Block or training plan reserves, or a node group's or Karpenter pool's maximum size, times the GPUs per node (a replica never spans nodes, so a node holds as many replicas as whole replicas fit its GPUs). Replicas beyond that stay pending forever. Lower `max_replicas`, or reserve more instances and raise the groups' maximum sizes.";
    AutoscalingWaitsForCapacity = "HF0361", Warning, "scaling up would wait for nodes that are not provisioned",
        "Autoscaling may ask for more replicas than the nodes provisioned when the stack is deployed (the node groups' desired sizes, the HyperPod instance groups' counts) can hold. A replica beyond them stays pending until someone scales the nodes up (on-demand capacity may not exist at all), then still needs its cold start. Raise the desired sizes to what `max_replicas` needs, or accept that the last replicas arrive late.";
    ScaleToZeroRefused = "HF0362", Error, "autoscaling may not scale to zero replicas",
        "Scale to zero is not offered: a large model's cold start is 20 to 80 minutes of moving weights into GPU memory and warming the engine up, so the first request after an idle period would wait that long, and the reserved node it runs on is paid for whether a replica runs or not. Set `min_replicas` to 1 or more.";
    AutoscalingReplicasNotOrdered = "HF0363", Error, "autoscaling's maximum replicas are below its minimum",
        "`max_replicas` must be at least `min_replicas` and at least 1.";
    InvalidAutoscaling = "HF0364", Error, "an autoscaling setting is malformed",
        "The server address is the https query endpoint of a Prometheus-compatible server, for AMP `https://aps-workspaces.<region>.amazonaws.com/workspaces/<workspace id>` (KEDA appends `/api/v1/query`); a query given is not empty; the target value is above 0; the polling interval is 1 to 86400 seconds, the cooldown and stabilization windows 0 to 86400.";
    ImportedClusterPrerequisite = "HF0383", Error, "a construct relies on an add-on the imported cluster is not stated to run",
        "A stack deploying onto an imported EKS cluster cannot see its add-ons, so what its constructs rely on is stated in the description (`ExistingEksCluster::runs`) and listed in the runbook's prerequisites: the EKS Pod Identity agent add-on for every role given to a service account by a Pod Identity association (the weights stager, Fluent Bit, the controllers), the AWS Load Balancer Controller for a served model's load balancer (unless the stack installs it), the NVIDIA device plugin for GPU pods (`HF0373`, unless the stack installs it). Without them the pods run without their roles, the Service gets no load balancer, or the GPU pods stay Pending, all after deployment. Check the cluster (`aws eks list-addons`, `kubectl get deployments -A`) and state what it runs, or install it with the stack.";
    InvalidExistingResource = "HF0380", Error, "an existing resource is named by a malformed id or ARN",
        "Imported resources are named by what AWS calls them: a VPC `vpc-` and a subnet `subnet-` with 8 or 17 hex digits, a security group `sg-...`, a bucket by its S3 name, a KMS key and an OIDC provider by their ARNs in the stack's account and region, an EKS cluster by its name (1-100 letters, digits, `-`, `_`). Copy the value from the console or `aws ec2 describe-subnets`.";
    ExistingResourceIncomplete = "HF0381", Error, "an existing resource lacks a value the stack needs from it",
        "A construct reads an attribute of an imported resource that the import does not give (an EKS cluster's OIDC issuer, for a role its service accounts assume). An EKS cluster needs private subnets in at least two availability zones; a subnet id may be listed once; a GPU or HyperPod subnet must be a private subnet of its own zone, and every subnet needs its zone id (`aws ec2 describe-subnets --query 'Subnets[].AvailabilityZoneId'`) so the capacity checks can compare zones. Complete the import with the subnets as they are.";
    WorkloadWithoutCapacity = "HF0370", Error, "no node group, node pool or instance group provides the workload's instance type",
        "A `VllmDeployment` runs on EKS nodes of its instance type (a managed node group or a Karpenter node pool of the same stack), an `InferenceEndpoint` on the HyperPod instance groups of its type. When none provides that type, the pods stay Pending forever while the capacity that was described (and possibly paid for) runs nothing. Set the workload's `instance_type` to a type the stack's capacity provides, or add a node group, node pool or instance group of that type. A Deployment does not run on HyperPod instance groups, nor an endpoint on EKS node groups. The rule applies when the stack creates the cluster the workload runs on (an EKS cluster for a Deployment, a HyperPod cluster for an endpoint): a stack deploying onto a cluster described elsewhere is not checked.";
    ReplicasAboveCapacity = "HF0371", Error, "the replicas need more GPUs than the capacity can ever provide",
        "`replicas` times the GPUs each replica takes must fit what the capacity serving the workload can ever provide: the instances a Capacity Block or training plan reserves, or else a node group's or Karpenter pool's maximum size or a HyperPod instance group's count, times the GPUs per node. A replica never spans nodes, so a node holds as many replicas as whole replicas fit its GPUs. Replicas beyond that stay Pending forever. An autoscaled Deployment states no `replicas` (its bound is HF0360); an endpoint's `replicas` is the count the operator starts with, and is checked.";
    CapacityBlockPartlyIdle = "HF0372", Warning, "part of a Capacity Block or capacity reservation is paid for and never used",
        "A Capacity Block is paid in full for every instance it reserves, whether an instance runs or not, and cannot be refunded; an On-Demand Capacity Reservation is billed at the on-demand rate for every instance it holds until it is cancelled, used or not. When the desired sizes of the node groups consuming it (summed over the groups of the stack naming the same reservation) are below the block's instance count, the rest of the block stays idle for its whole term. Raise the groups' desired and maximum sizes to the block's count, or reserve a smaller block next time. The hourly figure is the catalog's on-demand price of the idle instances where the catalog prices the stack's region (a Capacity Block's own price differs). If another stack or cluster consumes the rest of the block, this warning does not apply.";
    GpuWorkloadWithoutDevicePlugin = "HF0373", Error, "GPU pods on EKS nodes without the NVIDIA device plugin installed before them",
        "The EKS-optimized NVIDIA AMI brings the driver and container toolkit but not the Kubernetes device plugin, so a node advertises no `nvidia.com/gpu` until the NVIDIA device plugin (the `nvidia_device_plugin` Helm preset, or NVIDIA's GPU operator) runs on it, and a pod requesting GPUs stays Pending. This holds for managed node groups and Karpenter node pools alike. Add a Helm stage with the preset before the workload's stage. HyperPod nodes get the plugin from the HyperPod dependencies chart (HF0311). Like HF0370, the rule applies when the stack creates the EKS cluster.";
    LoadBalancerControllerWithoutRole = "HF0374", Error, "the AWS Load Balancer Controller is installed without its IAM role",
        "The `aws-load-balancer-controller` chart's service account gets its AWS permissions from the Pod Identity association of a `LoadBalancerController` construct for the same cluster. Without one in the same or an earlier stage the controller starts without credentials and never creates the load balancer, so the model's Service keeps no address. Add `LoadBalancerController::new(id, &eks.cluster)` (stack files: `load_balancer_controller`) to a CloudFormation stage before the Helm stage.";
    LoadBalancerControllerWrongCluster = "HF0375", Error, "the AWS Load Balancer Controller's values name another cluster or region",
        "The controller manages load balancers of the cluster named by its `clusterName` value (it tags them with it and discovers subnets by it) in the region named by its `region` value. Values naming a cluster this stack does not create, or a region other than the stack's, make it act on the wrong cluster or fail to start. Build the release with the stack's own cluster and region: `HelmRelease::aws_load_balancer_controller(&eks.name, <stack region>, &network.vpc)` (stack files: `cluster:` names the cluster, the region is the stack's).";
    InvalidTensorParallelSize = "HF0401", Error, "tensor parallel size does not fit the instance",
        "Tensor parallelism splits the model over GPUs of one node: the size must be a power of two no larger than the instance's GPU count, and the worker must request that many GPUs.";
    InvalidModelId = "HF0402", Error, "model id is malformed",
        "Hugging Face model ids look like `organization/name` with letters, digits, `_`, `.` and `-`.";
    InvalidServedModelName = "HF0403", Error, "served model name is malformed",
        "The served model name becomes the InferenceEndpointConfig `modelName`: 1-63 characters, letters and digits with single hyphens between them.";
    UnpinnedImage = "HF0404", Warning, "container image is not pinned",
        "An image without a tag (or tagged `latest`) changes under a running deployment. Pin a tag or digest.";
    ArgumentOwnedByBuilder = "HF0405", Error, "an extra argument repeats one the builder sets",
        "Arguments such as `--tensor-parallel-size` or `--served-model-name` are set from typed fields; setting them again in `extra_args` would make the two disagree. Use the typed setter.";
    GpuRequestExceedsInstance = "HF0406", Error, "the workload asks for more GPUs than the instance has",
        "A single-node vLLM server can use at most the GPUs of one instance.";
    InvalidKubernetesName = "HF0407", Error, "Kubernetes object name is malformed",
        "Kubernetes names are DNS labels: 1-63 lowercase letters, digits and hyphens, starting and ending with a letter or digit.";
    SecretLiteralInEnvironment = "HF0408", Error, "a secret is set as a literal environment variable",
        "Tokens such as `HF_TOKEN` must come from a Kubernetes Secret (`VllmServer::hf_token_secret`), never from a literal value in the manifest.";
    InvalidEnvironmentName = "HF0409", Error, "environment variable name is malformed",
        "Environment variable names are letters, digits and `_`, not starting with a digit.";
    PublicServiceWithoutOptIn = "HF0412", Error, "a Service is exposed to the internet without the explicit opt-in",
        "Model endpoints get an internal Network Load Balancer by default. An internet-facing one must be asked for by name (`VllmDeployment::internet_facing_load_balancer`), never through a raw annotation.";
    InvalidWeightBytes = "HF0413", Error, "the weights' size is out of range",
        "`weight_bytes` states the checkpoint's size for models the catalog does not know; it sizes the node's model cache and the startup budget. Give 1 byte to 1 PiB.";
    InvalidModelRevision = "HF0414", Error, "model revision is not a commit SHA",
        "A model revision pins the Hugging Face repository to one commit: 40 lowercase hexadecimal digits, as `https://huggingface.co/api/models/<model>/revision/main` reports in `sha`. Branches and tags are refused: a branch moves with every push and a tag can be re-pointed, so neither pins the code `--trust-remote-code` runs, and HyperPod's `huggingFaceModel.commitSHA` accepts only a commit.";
    UnpinnedRemoteCode = "HF0415", Warning, "the model's own code runs from an unpinned revision",
        "With `trust_remote_code` vLLM imports Python from the model repository and runs it in the server (as root in the vllm/vllm-openai image). Without a revision that code comes from the repository's `main` branch at every cold start, so a push to the repository changes what runs. Pin the commit you reviewed with `VllmServer::revision` (stack files: `revision`); the EKS path passes it as `--revision` and `--code-revision`, the HyperPod path as `huggingFaceModel.commitSHA`.";
    LoadBalancerSubnets = "HF0416", Error, "the load balancer's subnets are missing or do not fit the Service",
        "A load-balanced vLLM Service names its load balancer's subnets: the Load Balancer Controller places the Network Load Balancer there, and the NetworkPolicy admits port 8000 from those subnets' blocks only, because a Network Load Balancer with `ip` targets reaches the pod from its own addresses in them. An internal load balancer is placed in the subnets of the nodes serving the model (the node group or Karpenter pool of its instance type) unless `VllmDeployment::load_balancer_subnets` (stack files: `load_balancer_subnets`) names others; an internet-facing one needs the network's public subnets named. Give subnets of a network in the same stack, one per zone. A ClusterIP Service has no load balancer and takes none.";
    ImageNotPinnedByDigest = "HF0417", Warning, "container image is pinned by a tag, not a digest",
        "A tag is a name the registry can move: the same description can start a different engine after a restart or on a new node (a day-0 tag published before a model lands in a vLLM release is meant to be re-pointed). Pin the image by digest with `VllmServer::image_digest(\"sha256:...\")` (stack files: `image_digest`); `docker buildx imagetools inspect <image>` prints the tag's current digest. A tag may stay next to the digest for readers; the digest decides what runs.";
    InvalidImageDigest = "HF0418", Error, "image digest is malformed or given twice",
        "An image digest is `sha256:` followed by 64 lowercase hexadecimal digits, given either in the image reference (`repo@sha256:...`) or with `image_digest`, not both.";
    InvalidPullThroughCache = "HF0419", Error, "ECR pull-through cache rule is malformed",
        "A pull-through cache has a repository prefix of 2-30 lowercase letters and digits separated by `.`, `_`, `-` or `/`, an upstream registry host without a scheme (`registry-1.docker.io`), and, for Docker Hub (which ECR reaches only with credentials), the ARN of a Secrets Manager secret in the stack's region whose name starts with `ecr-pullthroughcache/`, holding `username` and `accessToken`.";
    InvalidImageReference = "HF0421", Error, "image is not a container image reference",
        "Write the image as a registry reference: `[registry[:port]/]repository[:tag]`, the repository lowercase letters, digits and `.`, `_`, `-` between `/`-separated parts, the tag at most 128 letters, digits, `_`, `.` and `-`; a digest goes in `image_digest`. Nothing else (spaces, `$`, quotes) can appear: the image is written into manifests and runbook commands.";
    InvalidModelStore = "HF0422", Error, "model store bucket name is not an S3 bucket name",
        "A model store's bucket is named when it is created, and S3 bucket names are global: 3-63 lowercase letters, digits, `-` and `.`, starting and ending with a letter or digit, not formatted as an IP address, without the reserved prefixes (`xn--`, `sthree-`, `amzn-s3-demo-`) and suffixes (`-s3alias`, `--ol-s3`, `--x-s3`, `--table-s3`, `.mrap`). Include the account id and region so the name is yours in every region you deploy to.";
    InvalidWeightsStaging = "HF0423", Error, "weights staging Job is malformed",
        "A staging Job runs an image pinned by digest (it holds write access to the model store) with 1 to 64 parallel copies.";
    StagedWeightsNeedRevision = "HF0424", Error, "a server reading staged weights has no pinned revision",
        "A model store keeps each checkpoint under `<model>/<revision>/`: the revision is the key, so a server reading from a store must pin the commit it serves (`revision`), the same one a staging Job copies.";
    LoadFormatCannotReadS3 = "HF0425", Error, "the load format cannot read weights from S3",
        "An EKS Deployment serving staged weights streams them from S3 into GPU memory with vLLM's Run:ai model streamer (`--load-format runai_streamer`), the loader that reads `s3://` paths. Leave `load_format` unset or set it to `runai_streamer`.";
    LoadBalancerMissesServingZone = "HF0426", Warning, "the load balancer's subnets may leave out the serving nodes' zone",
        "A Network Load Balancer sends traffic only to targets in the zones it has a subnet in (ELB User Guide, \"Availability Zones and load balancer nodes\"): a pod on a node in another zone is registered and never receives a request. Each subnet's zone id is an input given when the stack is deployed (the network's zones, a Capacity Block's or training plan's zone), so subnets placed by different inputs may or may not share a zone. Leave `load_balancer_subnets` out for an internal load balancer: it is then placed in the subnets of the nodes serving the model (a Capacity Block's GPU subnet), and the NetworkPolicy admits exactly their blocks. An internet-facing load balancer needs a public subnet in each serving zone.";
    MultiNodeWithoutEfa = "HF0427", Error, "a replica spans several nodes whose capacity launches no EFA interfaces",
        "A vLLM replica over several nodes moves activations between its pipeline stages, and NCCL's collectives, over the network between the nodes. Without EFA interfaces NCCL falls back to TCP sockets on the ENA interface and nothing fails: the replica serves tens of times slower (NVIDIA Dynamo's EFA guide measured 98 s against 1 s to the first token). The nodes of the replica's instance type must come from a managed node group with `efa(true)` (stack files: `efa: true`), on an instance type with EFA (`hyperforge catalog instances`, column EFA). Karpenter pools ask for no EFA interfaces: serve a multi-node replica from a node group.";
    MultiNodeReplicaUnsupported = "HF0428", Error, "a replica spanning several nodes asks for what hyperforge does not emit for it",
        "A replica with `nodes_per_replica` above 1 is one LeaderWorkerSet group: a leader pod running the API server and pipeline stage 0, and one headless worker pod per further stage, each on a node of its own with all its GPUs, started by vLLM's own multi-node launch (`--nnodes`, `--node-rank`, `--master-addr`, `--headless`). What that form cannot carry out is refused: a vLLM release without that launch (0.10 and older start multi-node replicas through Ray: use 0.11.2 or later), a replica given fewer GPUs than its nodes have, an inference endpoint on HyperPod (the vendored Inference Operator CRD has no multi-node form), and more than 16 nodes per replica.";
    MultiNodeControllerMissing = "HF0429", Warning, "a replica spans several nodes but no earlier stage installs the LeaderWorkerSet controller, Kueue or the EFA device plugin",
        "A multi-node replica is a LeaderWorkerSet (`leaderworkerset.x-k8s.io/v1`), which the API server refuses (`no matches for kind \"LeaderWorkerSet\"`) until its controller's CRD is installed; it is admitted by Kueue as one workload through a LocalQueue (`kueue.x-k8s.io/v1beta2`), refused the same way until Kueue is installed; and its pods request `vpc.amazonaws.com/efa`, which no node offers until the EFA device plugin runs: they stay Pending. Add the `lws`, `kueue` and `efa-device-plugin` Helm stages (`HelmRelease::leader_worker_set()`, `HelmRelease::kueue()`, `HelmRelease::efa_device_plugin()`; stack files: `preset: lws`, `preset: kueue`, `preset: efa-device-plugin`) before the stage holding the deployment. A cluster that runs all three already can acknowledge this warning.";
    MultiNodeNameTooLong = "HF0430", Error, "a replica spanning several nodes has a name over 39 characters",
        "Kueue admits each group of a multi-node replica as one workload and labels its pods with the group's identifier, the LeaderWorkerSet's name and a group suffix, in `kueue.x-k8s.io/pod-group-name`: a label value, at most 63 characters, so the LeaderWorkerSet's name is at most 39 (Kueue's LeaderWorkerSet guide, \"Long LeaderWorkerSet names\"). A longer name is accepted by the API server and then never admitted. Shorten the deployment's name.";
    InvalidContextLength = "HF0420", Error, "max model length is out of range",
        "`max_model_len` is a number of tokens from 1 to 16 Mi (16,777,216), above the longest context window published; a catalog model's own window is checked separately (HF0508).";
    InvalidThroughput = "HF0410", Error, "storage throughput must be positive",
        "The startup budget divides the weights' size by the download and load throughput; they must be greater than zero.";
    InvalidGpuMemoryUtilization = "HF0411", Error, "GPU memory utilization is outside (0, 1]",
        "`gpu_memory_utilization` is the fraction of each GPU's memory vLLM may use for weights, activations and KV cache: a number greater than 0 and at most 1, typically 0.90.";
    ModelDoesNotFit = "HF0501", Error, "the model's weights do not fit the GPUs at this tensor parallel size",
        "Each GPU holds weights / TP bytes of weights; vLLM may use `gpu_memory_utilization` x the GPU's memory. When the share exceeds that, the server fails only after downloading and loading the weights (for Kimi K3, an hour and 1.4 TB later). Figures are in GiB (2^30 bytes), GPU memory as EC2 reports it in MiB. Choose an instance the message lists, or serve over more GPUs (multi-node pipeline parallelism).";
    AttentionHeadsNotDivisible = "HF0502", Error, "attention heads are not divisible by the tensor parallel size",
        "Tensor parallelism gives each rank the same number of attention heads; vLLM refuses to start with \"Total number of attention heads (N) must be divisible by tensor parallel size (T)\". Choose a tensor parallel size that divides the head count.";
    InvalidDecodeContextParallelSize = "HF0503", Error, "tensor parallel size is not a multiple of the decode context parallel size",
        "Decode context parallelism (`--decode-context-parallel-size`) shards the MLA KV cache over groups of tensor parallel ranks, so it must be at least 1 and divide the tensor parallel size.";
    Mxfp4ShardGranularity = "HF0504", Error, "MXFP4 expert weights cannot be split at this tensor parallel size",
        "MXFP4 stores one scale per 32 values along the expert's intermediate dimension, so each tensor parallel rank's slice must hold a whole number of 32-value groups: (moe_intermediate_size / TP) % 32 == 0. Kimi K3: 3072 / 8 = 384 = 12 x 32.";
    OversizedInstance = "HF0505", Warning, "a smaller catalog instance would serve this model",
        "The model leaves so much memory unused that a cheaper instance type from the catalog holds it with room for the KV cache. The deployment works; it costs more than it needs to. The message names the smaller type and both on-demand prices (us-east-1).";
    WeightsDownloadedPerPod = "HF0506", Warning, "every new worker pod downloads the full weights from the Hugging Face Hub",
        "With `modelSourceType: huggingface` the inference operator's init container downloads the checkpoint into each worker pod's model volume: every replica, and every pod recreated after a node replacement or reschedule, fetches it again. `prefetchEnabled` only decides whether that init container or the server itself downloads; it is not a cache. Mirror the weights to S3 or FSx for Lustre (`modelSourceType: s3` / `fsx`) to load from AWS storage instead.";
    ModelNotInCatalog = "HF0507", Warning, "the model is not in the catalog; memory and parallelism were not checked",
        "hyperforge sizes a deployment from the model's parameters, attention layers and heads. Describe the model with `VllmServer::model_spec(Model::new(..)...)` so the checks run, or add it to the catalog.";
    ContextLengthExceedsModel = "HF0508", Error, "max model length exceeds the model's context length",
        "`max_model_len` may not exceed the context length the model was trained for (`max_position_embeddings`); vLLM refuses to start otherwise.";
    ContextDoesNotFitKvCache = "HF0509", Error, "one sequence at max model length does not fit the KV cache headroom",
        "After the weights, each GPU's headroom must hold the KV cache of at least one sequence of `max_model_len` tokens, or vLLM stops at start-up. MLA caches are replicated on every tensor parallel rank unless decode context parallelism shards them. Lower `max_model_len`, raise `gpu_memory_utilization`, set a decode context parallel size, or use a larger instance.";
    PodStorageTooSmallForWeights = "HF0510", Error, "the node storage holding pod volumes is smaller than the model's weights",
        "The weights are downloaded onto the node that serves them: into the pod volume the HyperPod inference operator's init container fills, or vLLM's cache in the EKS Deployment's ephemeral storage. Both live in kubelet's directory, next to containerd's images, on the storage the nodes keep them on: the local NVMe (HyperPod's lifecycle scripts with `ContainerStorage::InstanceStore`, or nodeadm's RAID 0 on EKS), else the HyperPod group's EBS volume or the node's root volume. That storage must hold the weights plus a tenth and 100 GiB for images and logs, or the download stops with no space left on the device. Put container data on the local NVMe, raise the volume, or choose an instance type with more local storage.";
    WeightsNotStaged = "HF0511", Error, "a server reads weights that no earlier staging Job copies into its store",
        "A server reading from a model store finds only what a `weights_staging` Job copied there: the same store, model and revision, in a stage before the server's (the runbook and `hyperforge deploy` wait for the Job before they go on). Add the staging Job, or make its revision match the server's.";
    EngineOptionNotAccepted = "HF0520", Error, "the engine release does not accept a command-line option the server is given",
        "Each server's options are checked against the options its engine release accepts, read from that release's own source (hyperforge's engine table: `codegen/schemas/engines/`, with the source distribution and its sha256). An option a release does not know stops the server at start-up, on a GPU node already paid for (`vllm serve: error: unrecognized arguments`); an option a release removed is the commonest breakage when an image moves (`--disable-log-requests`, kserve/kserve#6037, ai-dynamo/dynamo#8693), and some options never existed (`--enable-metrics`, defilantech/LLMKube#1030). argparse also accepts a unique prefix of an option; hyperforge refuses it, since a later release's new option makes it ambiguous. The message names the release and what to write instead when the table knows it.";
    EngineVersionUnchecked = "HF0521", Warning, "the engine's release is not known, so its options and variables are not checked",
        "hyperforge checks a server's options and environment variables against the release its image runs, which it reads from the image's tag (`vllm/vllm-openai:v0.27.0`, best pinned with its digest). A tag that names no release (`latest`, `kimi-k3`) or a release the engine table does not hold leaves them unchecked, and no start-up check confirms the release. Use a release tag the table holds; to add a release, `python3 codegen/tools/vllm_contract.py <version>` then `cargo run -p hyperforge-codegen`.";
    EngineVariableNotRead = "HF0522", Error, "the engine release reads no such environment variable",
        "vLLM reads only the `VLLM_` variables its release declares (`vllm/envs.py`); any other it reports as \"Unknown vLLM environment variable detected\" and ignores, so the behaviour the variable was meant to turn on never happens. Such variables come from a pre-release image's instructions (Kimi K3's day-0 `VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION`, which vLLM 0.27.0 replaced by enabling the fusion itself on Blackwell GPUs) or from another release. Remove the variable, or use a release that reads it; the message lists the table's releases that do.";
    EngineOptionDeprecated = "HF0523", Warning, "the engine release marks a command-line option deprecated",
        "The release still accepts the option and warns that it will go; a later release refuses it (HF0520). Replace it now: the message says with what, when the table knows.";
    FabricSettingNotForEfa = "HF0524", Error, "a setting that works only on InfiniBand or RoCE is given on an EFA instance type",
        "EFA is libfabric's SRD transport, not InfiniBand verbs. Settings that select verbs transports (`UCX_TLS=rc,...`, `NVSHMEM_REMOTE_TRANSPORT=ibgda`, `NVSHMEM_IB_ENABLE_IBGDA`, `NCCL_IB_HCA`, `NCCL_NET=IB` or `Socket`) make the traffic fall back to TCP without an error, 50-100 times slower (98 s instead of 1 s to the first token in NVIDIA Dynamo's EFA guide), or fail. Each refusal cites its source. Remove the setting; the message says what EFA uses instead.";
    KvConnectorConstraint = "HF0525", Error, "the KV connector cannot run with this parallelism or fabric",
        "KV connectors have constraints of their own: `NixlConnector` refuses pipeline parallel sizes above 1 (vllm-project/vllm#52913), and on EFA NIXL reaches line rate only with its LIBFABRIC backend; its default, UCX, lands on TCP speed without an error (NVIDIA Dynamo, EFA on EKS). Set `kv_connector_extra_config.backends` to `[\"LIBFABRIC\"]` on EFA, and serve without pipeline parallelism or with a connector that allows it.";
    TemplateNeedsS3Upload = "HF0601", Note, "template body exceeds 51,200 bytes and is deployed from S3",
        "CloudFormation accepts a template body of at most 51,200 bytes inline; larger templates (up to 1,000,000 bytes) must be uploaded to S3 first (`aws cloudformation deploy --s3-bucket ...`). The manifest marks such a stage `deploy_from_s3`, the runbook passes `--s3-bucket` and `hyperforge deploy` asks for `--template-bucket`, so this is a note, not a warning: deploying the template any other way needs the same upload.";
    TemplateTooLarge = "HF0602", Error, "template body exceeds 1,000,000 bytes",
        "CloudFormation rejects templates over 1,000,000 bytes even from S3. Split the stage into several stages.";
    TooManyResources = "HF0603", Error, "template has more than 500 resources",
        "A CloudFormation template may declare at most 500 resources. Split the stage into several stages.";
    TooManyOutputs = "HF0604", Error, "template has more than 200 outputs",
        "A CloudFormation template may declare at most 200 outputs (cross-stage exports count). Split the stage or reduce references across stages.";
    TooManyParameters = "HF0605", Error, "template has more than 200 parameters",
        "A CloudFormation template may declare at most 200 parameters.";
    InvalidLogicalId = "HF0606", Error, "template key is not a valid CloudFormation logical id",
        "Resource, output and parameter keys must match `^[a-zA-Z0-9]+$` and be at most 255 characters.";
    StackFileTooLarge = "HF0701", Error, "stack file is larger than 1 MiB",
        "Stack files are refused before parsing when they exceed 1 MiB (1,048,576 bytes); a stack description is a few hundred lines. Check that the path names the stack file you meant.";
    StackFileNotYaml = "HF0702", Error, "stack file is not valid YAML",
        "The file could not be parsed as one YAML document (or is not UTF-8, or its top level is not a mapping). The position is where the parser stopped. Anchors, aliases, tags and repeated keys are refused: stack files are plain data.";
    StackFileEmpty = "HF0703", Error, "stack file is empty",
        "The file holds no YAML document (it is empty or only comments). A stack file starts with `stack:`, `region:` and `stages:`; see docs/stack-files.md.";
    StackFileUnknownField = "HF0704", Error, "stack file has a field the format does not know",
        "Every object of a stack file has a fixed set of fields (docs/stack-files.md, docs/stack-file.schema.json). A misspelt field would otherwise be ignored silently; the help line suggests the closest allowed name.";
    StackFileWrongType = "HF0705", Error, "a stack file value has the wrong type",
        "The field takes another type of value: a string, a whole number, a number, `true`/`false`, a list or a mapping. Quoted numbers are strings.";
    StackFileMissingField = "HF0706", Error, "a required field is missing from the stack file",
        "The object lacks a field it needs (a stage's `kind`, a construct's id, a HyperPod cluster's `eks`, ...). The message names the field.";
    StackFileUnknownReference = "HF0707", Error, "a stack file reference names no construct",
        "References are construct ids (`vpc: Network`) or an id and an attribute (`subnets: Network.private_subnets`). The id must belong to a construct defined earlier in the file.";
    StackFileWrongReferenceKind = "HF0708", Error, "a stack file reference points at the wrong kind of construct",
        "Each reference field takes one kind of construct: `vpc` a network, `security_groups` cluster security groups, `cluster`/`eks` an EKS cluster, and so on. Subnets are attributes of a network: `private_subnets`, `public_subnets`, `hyperpod_subnet`, `gpu_subnet` (the last two only when the network declares them).";
    StackFileInvalidValue = "HF0709", Error, "a stack file value is not one of the allowed values",
        "The field takes one of a fixed set of values (a stage kind, a Helm preset, `nat_gateways: one | per_az`, ...), or the combination of fields is not allowed. The help line lists the values or suggests the closest one.";
    StackFileUnreadable = "HF0710", Error, "stack file cannot be read",
        "The file does not exist or cannot be read (permissions, a directory). The message carries the operating system's error.";
    StackFileOutOfRange = "HF0711", Error, "a stack file number is outside its field's range",
        "Every numeric field declares the values it accepts (docs/stack-file.schema.json lists them as `minimum`/`maximum`): counts as AWS allows them, sizes, rates and durations within what the service or the startup budget can use. The help line gives the range. A value outside it is not passed on, so the construct reports nothing more about it.";
    StackFileTooManyProblems = "HF0712", Error, "a stack file has more problems than are shown",
        "Loading describes at most the first 100 problems of a file and counts the rest: past that, a file is usually one mistake repeated, and describing tens of thousands of problems would cost more than reading the file. Fix the problems shown and load it again.";
    InvalidFsxStorageCapacity = "HF0801", Error, "FSx for Lustre storage capacity is not a size the deployment type offers",
        "Persistent SSD file systems (`PERSISTENT_2`) are 1200 GiB or a multiple of 2400 GiB (2400, 4800, 7200, ...). Round the capacity up to the next valid size.";
    InvalidFsxThroughput = "HF0802", Error, "FSx for Lustre throughput per TiB is not one the deployment type offers",
        "`PERSISTENT_2` file systems offer 125, 250, 500 or 1000 MB/s per TiB of storage; the file system's throughput is this value times its capacity in TiB.";
    InvalidFsxFileSystemPath = "HF0803", Error, "FSx for Lustre file system path is malformed",
        "A data repository association's file system path is a directory of the file system: it starts with `/` (`/weights`), at most 4096 characters, without control characters. `/` alone links the whole file system.";
    InvalidFsxS3Prefix = "HF0804", Error, "S3 prefix of a data repository association is malformed",
        "The prefix is the key prefix inside the bucket that the file system directory mirrors: empty for the whole bucket, or like `models/` (no leading `/`, ending in `/`, no empty segments, no `s3://` scheme, no control characters).";
    InternalError = "HF0902", Error, "hyperforge's own consistency check failed (a bug)",
        "A construct's stack-file declaration disagrees with its builder, or a construct's handle names a resource its expansion does not create. The input is not at fault; please report it with the stack description.";
    RenderFailed = "HF0901", Error, "an artifact could not be rendered",
        "Serializing a synthesized document failed. This is a defect in hyperforge, not in the description; please report it with the description that triggers it.";
    PolicyViolation = "HF1001", Error, "a resource fails a policy rule",
        "`hyperforge validate --policy NAME|FILE` (and `Assembly::check_policies`) evaluates AWS CloudFormation Guard rules over every synthesized CloudFormation template: the vendored packs from the AWS Guard Rules Registry (`wa-security-pillar`, `eks-kms`; see policy/README.md) or your own `.guard` files. The message names the rule and what it found; the help line is the rule's fix. The path is the construct path of the resource the rule names. Fix the resource, or, when the rule does not apply, acknowledge it on the resource with a reason a security reviewer would accept: the acknowledgement is written into the template's `Metadata.guard.SuppressedRules` (and checkov's, cfn_nag's and cdk_nag's suppression metadata), which the rules honour.";
    PolicyRuleInvalid = "HF1002", Error, "a policy rule file could not be evaluated",
        "Guard could not parse or evaluate the rule file (a syntax error, an unknown function). The message carries Guard's error. Check the file with `cfn-guard parse-tree --rules FILE`.";
    InvalidFleet = "HF1101", Error, "a fleet's name, matrix or deployment preferences are not valid",
        "A fleet's name names its StackSets (`<fleet>-<stage>`): a letter, then letters, digits and hyphens, at most 100 characters. Its matrix needs at least one region and one target; regions are AWS region codes, each listed once; targets are 12-digit account ids (self-managed permissions) or organizational unit ids `ou-...` (service-managed permissions), not both. Operation preferences: percentages from 0 to 100, a maximum concurrency of at least one account and, as counts, at most one more than the failure tolerance (StackSets' strict failure tolerance mode refuses more), and a region order that names only the fleet's regions, each once.";
    FleetTooLarge = "HF1102", Error, "a fleet has more members than allowed",
        "A fleet expands into regions x targets x models members; each is a stack of its own, with a StackSet instance per uniform stage. hyperforge bounds the matrix (64 regions, 10,000 targets, 32 models) and the members (10,000) before building any of them. Split the fleet, or use organizational units as targets: one unit stands for all its accounts.";
    InvalidFleetMember = "HF1103", Error, "a fleet member's name or values are not valid",
        "A member's name is the fleet's name, its region, and (when the fleet has several) its target and model, joined by hyphens; it is a stack name, so it must be a valid one (a letter, then letters, digits and hyphens, at most 100 characters) and unique in the fleet. A member's capacity id is a Capacity Block or capacity reservation id (`cr-` and 8 or 17 hexadecimal digits) or a training plan ARN, and its zone id must be in its region (`usw2-az2` is in us-west-2). Its own values (`values:`) have names of lower-case letters, digits and underscores, and values of 1 to 256 letters, digits and `._:/@+=-`: they become StackSet parameter values and command-line arguments in FLEET.md.";
    FleetMemberMismatch = "HF1104", Error, "a fleet member's description does not describe that member",
        "A fleet builds each member's stack from the member (its stack name, region and values). The description must give exactly one stack, named as the fleet's members' stack (`member.stack`, `${fleet.stack}`: the fleet's name, and the model's when the fleet varies models) and in the member's region. Every member of one model is the same stack in its own account and region, so its CloudFormation stages can be one StackSet; a stack named after the member (`member.name`, `${fleet.member}`) is accepted as before, but it writes the member's name into every resource name and export, so every stage is one the members deploy on their own (HF1105).";
    FleetStageNotUniform = "HF1105", Note, "a CloudFormation stage renders differently across members and is deployed per member",
        "A fleet deploys a CloudFormation stage through one StackSet when all members' templates of the stage are the same once their declared inputs (a capacity id, zone ids: parameters whose defaults are the member's values) are bound by name. A member value reaches a template in no other way: hyperforge never searches a template for one. So a stage whose templates differ otherwise (a member with more node groups, a region's own `values` or the member's name written into a name or a tag, a window that differs by region) is deployed by each member as its own stacks; the note names the first difference. Names that must differ between accounts and regions take them from the deployment (`AWS::AccountId`, `AWS::Region`, as a model store's bucket without `bucket_name` does). `fleet.json` lists such stages under `per_member_stages`.";
    FleetTooManyProblems = "HF1106", Error, "more fleet members failed than are shown",
        "When many members fail, the diagnostics of the first members are shown and the rest are counted: most often one mistake in the shared description fails every member in the same way.";
    FleetStackSetsTemplateOmitted = "HF1107", Note, "a fleet's StackSets template would exceed CloudFormation's size limit and is not written",
        "The StackSets template (`stacksets/<fleet>.stacksets.template.json`) declares every StackSet with one instance group per member, so it grows with the fleet; past CloudFormation's 1,000,000-byte template limit (a few thousand members) it could not be deployed and is not written. `hyperforge deploy --fleet` creates the same StackSets and instances through the API, and FLEET.md shows the AWS CLI commands.";
    FleetPlaceholderMalformed = "HF1120", Error, "a `${fleet...}` placeholder is malformed",
        "A stack file used by a fleet names a member's values as `${fleet.<name>}` inside any string: `${fleet.`, a name of lower-case letters, digits and underscores, and `}`, without spaces. The position is the placeholder's. Placeholders are replaced in values only, never in keys. Other `${...}` text (a shell variable in a script, say) is left as written.";
    FleetPlaceholderUnknown = "HF1121", Error, "a `${fleet.<name>}` placeholder names no member value",
        "The names a placeholder may use are the member's own values (`member`, `region`, `account`, `organizational_unit`, `model`, `capacity_id`, `zone_id`) and the names the fleet file's regions declare under `values:`. The help line suggests the closest name.";
    FleetPlaceholderWithoutFleet = "HF1122", Error, "a stack file uses `${fleet.<name>}` but is not loaded by a fleet",
        "Placeholders get their values from a fleet member, so a stack file that uses them describes members of a fleet, not a stack of its own: synthesize it through its fleet file (`hyperforge synth --fleet FILE`). Keep such stack files out of the stacks directory (`stacks/fleets/` is not read by `hyperforge synth`), or replace the placeholders with values.";
    FleetPlaceholderNoValue = "HF1123", Error, "a fleet member has no value for a placeholder of its stack file",
        "Every member must have a value for every placeholder its stack file uses: `model` exists only when the fleet lists `models`, `account` only for account targets (`organizational_unit` for units), `capacity_id` and `zone_id` only in regions with a `capacity_block` or `training_plan`, and a declared value only in the regions that declare it. The message names the first member without it; give it the value, or stop using the placeholder.";
    FleetStackFilePath = "HF1124", Error, "a fleet file's stack file path is absolute or leaves the allowed directories",
        "`stack_file` is a path relative to the fleet file. It must stay inside the fleet file's directory (or the stacks directory the command line reads): no absolute path, no `..` that climbs out, no symbolic link that leads out. A fleet file and its stack file are reviewed and moved together.";
    FleetFileConflict = "HF1125", Error, "a fleet file combines settings that exclude each other",
        "Some fleet file settings exclude each other: `accounts` and `organizational_units` (self-managed StackSets deploy to accounts, service-managed ones to organizational units), a region's `capacity_block` and `training_plan`, an amount's `count` and `percentage` (exactly one), and the role settings of one permission model with the other (`administration_role_arn`, `execution_role_name` are self-managed; `delegated_admin` is service-managed).";
}

impl Code {
    /// Where the code's rule comes from, one line of Markdown: the service documentation,
    /// specification or upstream source that states the limit or behaviour it enforces, or
    /// `hyperforge: ` and the reason when the rule is hyperforge's own.
    pub fn source(self) -> &'static str {
        sources::source(self)
    }

    /// The code's documentation as Markdown: a heading with id and summary, the severity, the
    /// explanation and the rule's source. This is what `hyperforge explain CODE` prints.
    pub fn explain_markdown(self) -> String {
        let severity = self.severity().as_str();
        format!(
            "## {}: {}\n\nSeverity: {severity}. In Rust: `Code::{}`.\n\n{}\n\nSource: {}\n",
            self.id(),
            self.summary(),
            self.rust_name(),
            self.explanation(),
            self.source()
        )
    }

    /// Every code's documentation in one Markdown document (`docs/diagnostics.md`).
    pub fn reference_markdown() -> String {
        let mut out = String::from(
            "# Diagnostic codes\n\n\
             Generated from `Code::ALL` by `tests/it/diagnostics_doc.rs`; do not edit. Regenerate \
             with `HYPERFORGE_BLESS=1 cargo test --test it diagnostics_doc::`.\n\n\
             Errors stop synthesis; warnings do not unless synthesis runs with \
             `SynthOptions { deny_warnings: true, .. }` (`hyperforge synth --deny-warnings`); \
             notes say how the description is deployed and never stop anything. Memory figures are GiB (2^30 bytes).\n\n\
             | code | Rust name | severity | summary |\n|---|---|---|---|\n",
        );
        for code in Code::ALL {
            let severity = code.severity().as_str();
            out.push_str(&format!(
                "| `{}` | `Code::{}` | {severity} | {} |\n",
                code.id(),
                code.rust_name(),
                code.summary()
            ));
        }
        for code in Code::ALL {
            out.push('\n');
            out.push_str(&code.explain_markdown());
        }
        out
    }
}

/// Edit distance, for "did you mean" suggestions.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The closest of `candidates` to `word`, if close enough to be a likely typo (for "did you
/// mean" help lines).
pub fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let word_l = word.to_ascii_lowercase();
    let word_chars = word.chars().count();
    let limit = |c: &str| (c.len().max(word.len()) / 3).max(2);
    candidates
        .into_iter()
        // The distance is at least the difference in length: a word far longer than every
        // candidate (a pasted blob) is no typo, and comparing it would cost its length times
        // each candidate's.
        .filter(|c| word_chars.abs_diff(c.chars().count()) <= limit(c))
        .map(|c| (distance(&word_l, &c.to_ascii_lowercase()), c))
        .filter(|(d, c)| *d <= limit(c))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.id())
    }
}

/// One problem in a description.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// The stable code.
    pub code: Code,
    /// The construct path (`kimi-k3-hyperpod/Network/Vpc`) the problem belongs to.
    pub path: String,
    /// The field of the construct at fault, as the builder and stack files name it
    /// (`max_model_len`, `capacity_block.az_id`), when one field is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// What is wrong, with the offending values and numbers.
    pub message: String,
    /// What to do about it.
    pub help: String,
    /// Supporting facts (the memory arithmetic, ...), one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Where in the describing program the construct was added (`src/main.rs:52:5`), for
    /// constructs added from Rust code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

impl Diagnostic {
    /// A diagnostic with the code's own severity.
    pub fn new(
        code: Code,
        path: impl Into<String>,
        message: impl Into<String>,
        help: impl Into<String>,
    ) -> Self {
        Diagnostic {
            severity: code.severity(),
            code,
            path: path.into(),
            field: None,
            message: message.into(),
            help: help.into(),
            notes: Vec::new(),
            location: None,
        }
    }

    /// The same diagnostic about one field of its construct (see [`Diagnostics::report_field`]).
    pub fn at_field(mut self, field: &str) -> Self {
        self.field = Some(field.to_owned());
        self
    }

    /// Adds a supporting fact.
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = self.severity.as_str();
        writeln!(f, "{level}[{}]: {}", self.code, self.message)?;
        match &self.location {
            Some(location) => writeln!(f, "  --> {} at {location}", self.path)?,
            None => writeln!(f, "  --> {}", self.path)?,
        }
        for note in &self.notes {
            writeln!(f, "  = note: {note}")?;
        }
        write!(f, "  = help: {}", self.help)
    }
}

/// All diagnostics of one run, in the order they were found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Diagnostics(Vec<Diagnostic>);

impl Diagnostics {
    /// No diagnostics.
    pub fn new() -> Self {
        Diagnostics(Vec::new())
    }

    /// Keeps only the diagnostics for which `keep` is true.
    pub fn retain(&mut self, keep: impl FnMut(&Diagnostic) -> bool) {
        self.0.retain(keep)
    }

    /// Every diagnostic, to amend (a location, a path mapped into a file).
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Diagnostic> {
        self.0.iter_mut()
    }

    /// Records one diagnostic.
    pub fn push(&mut self, diagnostic: Diagnostic) {
        self.0.push(diagnostic);
    }

    /// Records a diagnostic with the code's own severity.
    pub fn report(
        &mut self,
        code: Code,
        path: impl Into<String>,
        message: impl Into<String>,
        help: impl Into<String>,
    ) {
        self.push(Diagnostic::new(code, path, message, help));
    }

    /// [`Diagnostics::report`] about one field of the construct at `path` (so a stack file
    /// points at the line that set it).
    pub fn report_field(
        &mut self,
        code: Code,
        path: impl Into<String>,
        field: &str,
        message: impl Into<String>,
        help: impl Into<String>,
    ) {
        let mut d = Diagnostic::new(code, path, message, help);
        d.field = Some(field.to_owned());
        self.push(d);
    }

    /// Appends all of `other`.
    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }

    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.0.iter().any(|d| d.severity == Severity::Error)
    }

    /// Whether there are no diagnostics at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Number of diagnostics.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The diagnostics in the order found.
    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }

    /// The errors only.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(|d| d.severity == Severity::Error)
    }

    /// The warnings only.
    pub fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(|d| d.severity == Severity::Warning)
    }

    /// The diagnostics with `code`.
    pub fn with_code(&self, code: Code) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(move |d| d.code == code)
    }

    /// Whether any diagnostic is a warning.
    pub fn has_warnings(&self) -> bool {
        self.0.iter().any(|d| d.severity == Severity::Warning)
    }

    /// Whether a diagnostic with `code` was reported at `path`.
    pub fn contains(&self, code: Code, path: &str) -> bool {
        self.0.iter().any(|d| d.code == code && d.path == path)
    }

    /// The machine-readable form: a JSON array of `{severity, code, path, message, help}`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|_| "[]".to_owned())
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Diagnostics {
    type Item = &'a Diagnostic;
    type IntoIter = std::slice::Iter<'a, Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.0 {
            writeln!(f, "{d}\n")?;
        }
        let errors = self.errors().count();
        let warnings = self.warnings().count();
        write!(f, "{errors} error(s), {warnings} warning(s)")
    }
}

impl std::error::Error for Diagnostics {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Every code names where its rule comes from, in one line: hyperforge's own reason, or a
    /// document whose links are absolute `https` addresses (the reference is read off the site).
    #[test]
    fn every_code_names_its_source() {
        let mut linked = 0;
        for code in Code::ALL {
            let source = code.source();
            assert!(
                !source.trim().is_empty() && !source.contains('\n'),
                "{}: {source:?}",
                code.id()
            );
            for link in source.split("](").skip(1) {
                assert!(link.starts_with("https://"), "{}: {link}", code.id());
                linked += 1;
            }
        }
        assert!(linked >= 100, "{linked} linked sources");
    }

    #[test]
    fn codes_are_unique_and_documented() {
        let ids: BTreeSet<_> = Code::ALL.iter().map(|c| c.id()).collect();
        assert_eq!(ids.len(), Code::ALL.len());
        for code in Code::ALL {
            assert!(
                code.id().starts_with("HF") && code.id().len() == 6,
                "{code:?}"
            );
            assert!(!code.summary().is_empty() && code.explanation().len() > 20);
            assert_eq!(Code::from_id(&code.id().to_lowercase()), Some(*code));
        }
    }

    #[test]
    fn renders_like_rustc_and_as_json() {
        let mut ds = Diagnostics::new();
        ds.report(
            Code::InvalidCidr,
            "app/Network",
            "`10.0.0.0/33` is not a CIDR block",
            "write it like 10.0.0.0/16",
        );
        let text = ds.to_string();
        assert!(text.starts_with("error[HF0101]: `10.0.0.0/33` is not a CIDR block\n  --> app/Network\n  = help: write it like 10.0.0.0/16"));
        assert!(text.ends_with("1 error(s), 0 warning(s)"));
        let json: serde_json::Value = serde_json::from_str(&ds.to_json()).unwrap();
        assert_eq!(json[0]["code"], "HF0101");
        assert_eq!(json[0]["severity"], "error");
        assert!(ds.has_errors());
    }

    #[test]
    fn suggestions_are_close_names() {
        assert_eq!(
            suggest("UpdateConfg", ["UpdateConfig", "Labels"]),
            Some("UpdateConfig")
        );
        assert_eq!(suggest("zzzz", ["cidr", "nat_gateways"]), None);
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
