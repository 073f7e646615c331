//! DeepSeek-V3 for one team, on what the platform team already runs: an existing VPC and EKS
//! cluster in us-east-2, a Capacity Block of two p5en.48xlarge bought for the launch, and vLLM
//! behind an internal load balancer. It depends on hyperforge as any crate would, and shows
//! the ways out of what hyperforge models: imports, a construct of the team's own, raw
//! resources in each format, a patch of a generated Kubernetes object, and an acknowledged
//! warning.

use hyperforge::app::Stack;
use hyperforge::constructs::*;
use hyperforge::diagnostics::{Code, Diagnostics};
use hyperforge::resources::{KubeObject, RawTags, RawValue, Rule, Scope};
use hyperforge::serde_json::json;
use hyperforge::{App, ObjectPatch};

/// The region of the platform team's cluster.
pub const REGION: &str = "us-east-2";
/// The zone of the Capacity Block.
pub const BLOCK_AZ_ID: &str = "use2-az2";
/// The Capacity Block (a placeholder; the real id is a deploy-time parameter).
pub const BLOCK_ID: &str = "cr-0a1b2c3d4e5f60718";
/// GPUs per server: one p5en.48xlarge, tensor parallel 8.
pub const GPUS_PER_REPLICA: u32 = 8;
/// Servers: one per instance of the block.
pub const REPLICAS: u32 = 2;

/// A namespace's GPU budget: a `ResourceQuota` on `requests.nvidia.com/gpu`, so another
/// team's Deployment in the namespace cannot take the block's GPUs.
#[derive(Clone, Debug)]
pub struct GpuQuota {
    id: String,
    namespace: String,
    gpus: u32,
}

impl GpuQuota {
    /// At most `gpus` GPUs requested in `namespace`.
    pub fn new(id: impl Into<String>, namespace: impl Into<String>, gpus: u32) -> Self {
        GpuQuota {
            id: id.into(),
            namespace: namespace.into(),
            gpus,
        }
    }
}

impl Construct for GpuQuota {
    type Handle = ();
    const KIND: &'static str = "gpu_quota";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, _stack: &str) {}

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        if self.gpus == 0 || self.gpus > 1024 {
            ds.report(
                Code::UserConstruct,
                cx.path,
                format!("a quota of {} GPUs is outside 1-1024", self.gpus),
                "give the GPUs the namespace's servers request: replicas x tensor parallel size",
            );
        }
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        let quota = json!({
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": { "name": "gpu-quota", "namespace": self.namespace },
            "spec": { "hard": { "requests.nvidia.com/gpu": self.gpus.to_string() } },
        });
        if let Ok(object) = KubeObject::from_value(quota) {
            scope.add_object(object);
        }
    }
}

/// The team's stack.
pub fn stack() -> Stack {
    let mut stack = Stack::new("team-deepseek", REGION)
        .description("DeepSeek-V3 for the research team, on the platform's VPC and EKS cluster.")
        .tag("team", "research")
        .tag("cost-center", "ml-4711");

    // What exists: the platform's VPC and cluster, as `aws ec2 describe-subnets` and
    // `aws eks describe-cluster` show them.
    let foundation = stack.cloudformation_stage("foundation");
    let network = stack.add(
        foundation,
        ExistingNetwork::new("Network", "vpc-0a1b2c3d4e5f60718")
            .private_subnet("subnet-0a1b2c3d4e5f60711", "use2-az1", "10.40.0.0/19")
            .private_subnet("subnet-0a1b2c3d4e5f60712", "use2-az2", "10.40.32.0/19")
            .gpu_subnet("subnet-0a1b2c3d4e5f60713", BLOCK_AZ_ID, "10.40.64.0/19"),
    );
    let eks = stack.add(
        foundation,
        ExistingEksCluster::new("Eks", "ml-platform")
            .oidc_issuer_url(
                "https://oidc.eks.us-east-2.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF",
            )
            .cluster_security_group_id("sg-0a1b2c3d4e5f60719")
            .kubernetes_version("1.33")
            // The platform team runs the Pod Identity agent; the stack installs the rest.
            .runs(ClusterAddOn::PodIdentityAgent),
    );
    stack.add(
        foundation,
        LoadBalancerController::new("LoadBalancerController", &eks.cluster),
    );
    let alarms = stack.add(foundation, AlarmTopic::new("Alarms"));
    // A raw resource in both formats, with a typed reference: the on-call tooling finds the
    // alarm topic through a parameter.
    stack.add(
        foundation,
        RawResource::new("AlarmTopicParameter")
            .cloudformation(
                "AWS::SSM::Parameter",
                RawValue::object([
                    ("Name", RawValue::from("/research/deepseek/alarm-topic-arn")),
                    ("Type", RawValue::from("String")),
                    ("Value", RawValue::from(alarms.topic.arn())),
                    (
                        "Description",
                        RawValue::from("Alarm topic of the DeepSeek-V3 endpoint"),
                    ),
                ]),
            )
            .terraform(
                "aws_ssm_parameter",
                RawValue::object([
                    ("name", RawValue::from("/research/deepseek/alarm-topic-arn")),
                    ("type", RawValue::from("String")),
                    ("value", RawValue::from(alarms.topic.arn())),
                    (
                        "description",
                        RawValue::from("Alarm topic of the DeepSeek-V3 endpoint"),
                    ),
                ]),
            )
            // The parameter type takes its tags as an object: the stack's cost tags reach it.
            .cloudformation_tags(RawTags::Map)
            .acknowledge(
                Rule::checkov(&["CKV2_AWS_34"]),
                "the parameter holds the alarm topic's ARN, which is not a secret, and CloudFormation cannot create SecureString parameters",
            ),
    );
    // Raw resources referring to each other through typed handles, lowered in each format as
    // hyperforge's own resources are: the team's escalation topic, encrypted with a key of its
    // own, published to by an alarm on failed alarm deliveries.
    stack.add(foundation, EscalationTopic::new("Escalation"));

    let nodes = stack.cloudformation_stage("nodes");
    stack.add(
        nodes,
        ManagedNodeGroup::gpu(
            "GpuNodes",
            &eks.cluster,
            "p5en.48xlarge",
            network.gpu_subnet.iter(),
        )
        .capacity(NodeCapacity::capacity_block_of(
            BLOCK_ID,
            BLOCK_AZ_ID,
            REPLICAS,
        ))
        .scaling(0, i64::from(REPLICAS), i64::from(REPLICAS)),
    );
    stack.helm_stage("nvidia-device-plugin", HelmRelease::nvidia_device_plugin());
    stack.helm_stage(
        "aws-load-balancer-controller",
        HelmRelease::aws_load_balancer_controller(&eks.name, REGION, &network.vpc),
    );

    let workload = stack.kubernetes_stage("workload");
    // A raw Kubernetes object: serving preempts the namespace's batch work.
    stack.add(
        workload,
        KubernetesManifest::new(
            "ServingPriority",
            json!({
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": { "name": "serving" },
                "value": 1_000_000,
                "description": "Model servers preempt batch work.",
            }),
        ),
    );
    let server = VllmServer::new("deepseek-ai/DeepSeek-V3", "vllm/vllm-openai:v0.11.2")
        .image_digest("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
        .revision("0123456789abcdef0123456789abcdef01234567")
        .served_model_name("DeepSeek-V3")
        .tensor_parallel_size(GPUS_PER_REPLICA)
        .api_key_secret("deepseek-api-key", "api-key");
    stack.add(
        workload,
        VllmDeployment::new("DeepSeek", server, "p5en.48xlarge")
            .name("deepseek-v3")
            .replicas(REPLICAS as i32)
            .load_balancer_subnets(&network.private_subnets),
    );
    // A patch of a generated object: the servers run in the priority class above.
    stack.patch_object(
        "DeepSeek/Deployment",
        ObjectPatch::Merge(json!({
            "spec": { "template": { "spec": { "priorityClassName": "serving" } } }
        })),
    );
    // The team's own construct, in the same stage.
    stack.add(
        workload,
        GpuQuota::new("GpuQuota", "deepseek-v3", REPLICAS * GPUS_PER_REPLICA),
    );
    stack
}

/// The app: the team's stack, tagged for cost allocation.
pub fn app() -> App {
    App::new().tag("managed-by", "hyperforge").stack(stack())
}

/// The team's escalation topic from raw resources only, a construct of the team's own: a KMS
/// key, an SNS topic encrypted with it, the topic's policy (TLS only, CloudWatch alarms of the
/// account may publish) and an alarm publishing to it when SNS fails to deliver a
/// notification. The raw resources refer to each other through typed handles (the key and the
/// topic are `referable_as` their kinds); its handle is the topic.
#[derive(Clone, Debug)]
pub struct EscalationTopic {
    id: String,
}

impl EscalationTopic {
    /// The topic, as construct `id`.
    pub fn new(id: impl Into<String>) -> Self {
        EscalationTopic { id: id.into() }
    }
}

impl Construct for EscalationTopic {
    type Handle = hyperforge::app::Ref<hyperforge::app::kind::SnsTopic>;
    const KIND: &'static str = "escalation_topic";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> Self::Handle {
        hyperforge::app::Ref::new(stack, format!("{}/Topic", self.id))
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        use hyperforge::app::text::{Pseudo, Text};
        use hyperforge::app::{kind, Kind, Ref};
        let stack_name = scope.stack().name().to_owned();
        let root = Text::lit("arn:")
            .push_pseudo(Pseudo::Partition)
            .push_lit(":iam::")
            .push_pseudo(Pseudo::AccountId)
            .push_lit(":root");
        scope.add(
            "Key",
            RawResource::new("Key")
                .referable_as(Kind::KmsKey)
                .cloudformation(
                    "AWS::KMS::Key",
                    RawValue::object([
                        ("Description", RawValue::from("Encrypts the team's escalation topic")),
                        ("EnableKeyRotation", RawValue::from(json!(true))),
                        (
                            "KeyPolicy",
                            RawValue::object([
                                ("Version", RawValue::from("2012-10-17")),
                                (
                                    "Statement",
                                    RawValue::List(vec![
                                        RawValue::object([
                                            ("Sid", RawValue::from("AccountAdministers")),
                                            ("Effect", RawValue::from("Allow")),
                                            (
                                                "Principal",
                                                RawValue::object([("AWS", RawValue::Text(root.clone()))]),
                                            ),
                                            ("Action", RawValue::from("kms:*")),
                                            ("Resource", RawValue::from("*")),
                                        ]),
                                        RawValue::from(json!({
                                            "Sid": "AlarmsUseKey",
                                            "Effect": "Allow",
                                            "Principal": {"Service": "cloudwatch.amazonaws.com"},
                                            "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
                                            "Resource": "*"
                                        })),
                                    ]),
                                ),
                            ]),
                        ),
                    ]),
                )
                .terraform(
                    "aws_kms_key",
                    RawValue::object([
                        ("description", RawValue::from("Encrypts the team's escalation topic")),
                        ("enable_key_rotation", RawValue::from(json!(true))),
                        (
                            "policy",
                            RawValue::Text(
                                Text::lit(r#"{"Version":"2012-10-17","Statement":[{"Sid":"AccountAdministers","Effect":"Allow","Principal":{"AWS":""#)
                                    .push_text(root)
                                    .push_lit(r#""},"Action":"kms:*","Resource":"*"},{"Sid":"AlarmsUseKey","Effect":"Allow","Principal":{"Service":"cloudwatch.amazonaws.com"},"Action":["kms:Decrypt","kms:GenerateDataKey*"],"Resource":"*"}]}"#),
                            ),
                        ),
                    ]),
                )
                .cloudformation_tags(RawTags::KeyValueList)
                .resource(),
        );
        let key: Ref<kind::KmsKey> = Ref::new(&stack_name, scope.path("Key"));
        scope.add(
            "Topic",
            RawResource::new("Topic")
                .referable_as(Kind::SnsTopic)
                .cloudformation(
                    "AWS::SNS::Topic",
                    RawValue::object([
                        ("DisplayName", RawValue::from("DeepSeek escalation")),
                        ("KmsMasterKeyId", RawValue::from(key.arn())),
                    ]),
                )
                .terraform(
                    "aws_sns_topic",
                    RawValue::object([
                        ("display_name", RawValue::from("DeepSeek escalation")),
                        ("kms_master_key_id", RawValue::from(key.arn())),
                    ]),
                )
                .cloudformation_tags(RawTags::KeyValueList)
                .resource(),
        );
        let topic: Ref<kind::SnsTopic> = Ref::new(&stack_name, scope.path("Topic"));
        let account = Text::default().push_pseudo(Pseudo::AccountId);
        let topic_arn = Text::attr(topic.arn());
        let policy_json = Text::lit(r#"{"Version":"2012-10-17","Statement":[{"Sid":"AlarmsPublish","Effect":"Allow","Principal":{"Service":"cloudwatch.amazonaws.com"},"Action":"sns:Publish","Resource":""#)
            .push_text(topic_arn.clone())
            .push_lit(r#"","Condition":{"StringEquals":{"aws:SourceAccount":""#)
            .push_text(account.clone())
            .push_lit(r#""}}},{"Sid":"DenyInsecureTransport","Effect":"Deny","Principal":{"AWS":"*"},"Action":"sns:Publish","Resource":""#)
            .push_text(topic_arn)
            .push_lit(r#"","Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}"#);
        scope.add(
            "Policy",
            RawResource::new("Policy")
                .cloudformation(
                    "AWS::SNS::TopicPolicy",
                    RawValue::object([
                        ("Topics", RawValue::List(vec![RawValue::from(topic.arn())])),
                        (
                            "PolicyDocument",
                            RawValue::object([
                                ("Version", RawValue::from("2012-10-17")),
                                (
                                    "Statement",
                                    RawValue::List(vec![
                                        RawValue::object([
                                            ("Sid", RawValue::from("AlarmsPublish")),
                                            ("Effect", RawValue::from("Allow")),
                                            (
                                                "Principal",
                                                RawValue::from(
                                                    json!({"Service": "cloudwatch.amazonaws.com"}),
                                                ),
                                            ),
                                            ("Action", RawValue::from("sns:Publish")),
                                            ("Resource", RawValue::from(topic.arn())),
                                            (
                                                "Condition",
                                                RawValue::object([(
                                                    "StringEquals",
                                                    RawValue::object([(
                                                        "aws:SourceAccount",
                                                        RawValue::Text(account),
                                                    )]),
                                                )]),
                                            ),
                                        ]),
                                        RawValue::object([
                                            ("Sid", RawValue::from("DenyInsecureTransport")),
                                            ("Effect", RawValue::from("Deny")),
                                            ("Principal", RawValue::from(json!({"AWS": "*"}))),
                                            ("Action", RawValue::from("sns:Publish")),
                                            ("Resource", RawValue::from(topic.arn())),
                                            (
                                                "Condition",
                                                RawValue::from(
                                                    json!({"Bool": {"aws:SecureTransport": false}}),
                                                ),
                                            ),
                                        ]),
                                    ]),
                                ),
                            ]),
                        ),
                    ]),
                )
                .terraform(
                    "aws_sns_topic_policy",
                    RawValue::object([
                        ("arn", RawValue::from(topic.arn())),
                        ("policy", RawValue::Text(policy_json)),
                    ]),
                )
                .resource(),
        );
        // The alarm's properties once, in CloudFormation's names; Terraform's are their snake case.
        let alarm = [
            (
                "AlarmName",
                RawValue::from("deepseek-sns-delivery-failures"),
            ),
            (
                "AlarmDescription",
                RawValue::from("SNS failed to deliver notifications of the team's account"),
            ),
            ("Namespace", RawValue::from("AWS/SNS")),
            ("MetricName", RawValue::from("NumberOfNotificationsFailed")),
            ("Statistic", RawValue::from("Sum")),
            ("Period", RawValue::from(json!(300))),
            ("EvaluationPeriods", RawValue::from(json!(1))),
            ("Threshold", RawValue::from(json!(1))),
            (
                "ComparisonOperator",
                RawValue::from("GreaterThanOrEqualToThreshold"),
            ),
            ("TreatMissingData", RawValue::from("notBreaching")),
            (
                "AlarmActions",
                RawValue::List(vec![RawValue::from(topic.arn())]),
            ),
        ];
        let snake = |name: &str| {
            let mut out = String::new();
            for (i, c) in name.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(c.to_ascii_lowercase());
            }
            out
        };
        scope.add(
            "Alarm",
            RawResource::new("Alarm")
                .cloudformation(
                    "AWS::CloudWatch::Alarm",
                    RawValue::object(alarm.iter().map(|(k, v)| (*k, v.clone()))),
                )
                .terraform(
                    "aws_cloudwatch_metric_alarm",
                    RawValue::object(alarm.iter().map(|(k, v)| (snake(k), v.clone()))),
                )
                .cloudformation_tags(RawTags::KeyValueList)
                .resource(),
        );
    }
}
