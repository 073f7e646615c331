//! Support traits for the generated L1 types.

/// Metadata every generated L1 resource struct carries about its CloudFormation type.
pub trait CfnResource: serde::Serialize {
    /// The CloudFormation type name, e.g. `"AWS::EC2::VPC"`.
    const TYPE_NAME: &'static str;
    /// How the type takes tags (from the schema's `tagging` and the tag property's shape).
    const TAGS: TagStyle;
    /// Attribute names usable with `Fn::GetAtt`: top-level read-only properties (`"Arn"`,
    /// `"VpcId"`) and nested ones (`/properties/Foo/Bar` as `"Foo.Bar"`).
    const ATTRIBUTES: &'static [&'static str];
    /// Create-only property names (changing them replaces the resource); nested ones dotted.
    const CREATE_ONLY: &'static [&'static str];
}

/// How a resource type takes tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagStyle {
    /// The type has no tag property (or the schema says it is not taggable).
    NotTaggable,
    /// The tag property is a list of `{"Key": ..., "Value": ...}` objects.
    KeyValueList,
    /// The tag property is an object of string keys to string values.
    Map,
}

#[cfg(test)]
mod tests {
    use super::{CfnResource, TagStyle};
    use crate::synth::cloudformation::expr::{Expr, Val};
    use crate::synth::cloudformation::l1::{
        ec2_vpc, iam_role, s3_bucket, sagemaker_cluster, ssm_parameter,
    };
    use serde_json::json;

    #[test]
    fn vpc_with_intrinsic_and_omitted_fields() {
        let vpc = ec2_vpc::Vpc {
            cidr_block: Some(Val::Expr(Expr::reference("VpcCidr"))),
            enable_dns_hostnames: Some(true.into()),
            tags: Some(vec![ec2_vpc::Tag {
                key: "Name".into(),
                value: Val::Expr(Expr::sub("${AWS::StackName}-vpc")),
            }]),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&vpc).unwrap(),
            json!({
                "CidrBlock": {"Ref": "VpcCidr"},
                "EnableDnsHostnames": true,
                "Tags": [{"Key": "Name", "Value": {"Fn::Sub": "${AWS::StackName}-vpc"}}]
            })
        );
        assert_eq!(ec2_vpc::Vpc::TYPE_NAME, "AWS::EC2::VPC");
        assert_eq!(ec2_vpc::Vpc::TAGS, TagStyle::KeyValueList);
        assert!(ec2_vpc::Vpc::ATTRIBUTES.contains(&"VpcId"));
        assert!(ec2_vpc::Vpc::CREATE_ONLY.contains(&"CidrBlock"));
    }

    #[test]
    fn sagemaker_cluster_with_eks_orchestrator_and_training_plan() {
        let cluster = sagemaker_cluster::Cluster {
            cluster_name: Some("inference".into()),
            orchestrator: Some(sagemaker_cluster::Orchestrator {
                eks: Some(sagemaker_cluster::ClusterOrchestratorEksConfig {
                    cluster_arn: Val::Expr(Expr::get_att("EksCluster", "Arn")),
                }),
                ..Default::default()
            }),
            instance_groups: Some(vec![sagemaker_cluster::ClusterInstanceGroup {
                instance_group_name: "gpu".into(),
                instance_type: Some("ml.p5.48xlarge".into()),
                instance_count: 2.into(),
                execution_role: Val::Expr(Expr::get_att("NodeRole", "Arn")),
                life_cycle_config: Some(sagemaker_cluster::ClusterLifeCycleConfig {
                    source_s3_uri: Some("s3://bucket/lifecycle/".into()),
                    on_create: Some("on_create.sh".into()),
                    ..Default::default()
                }),
                training_plan_arn: Some(
                    "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p".into(),
                ),
                ..Default::default()
            }]),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&cluster).unwrap(),
            json!({
                "ClusterName": "inference",
                "InstanceGroups": [{
                    "ExecutionRole": {"Fn::GetAtt": ["NodeRole", "Arn"]},
                    "InstanceCount": 2,
                    "InstanceGroupName": "gpu",
                    "InstanceType": "ml.p5.48xlarge",
                    "LifeCycleConfig": {"OnCreate": "on_create.sh", "SourceS3Uri": "s3://bucket/lifecycle/"},
                    "TrainingPlanArn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p"
                }],
                "Orchestrator": {"Eks": {"ClusterArn": {"Fn::GetAtt": ["EksCluster", "Arn"]}}}
            })
        );
        assert_eq!(
            sagemaker_cluster::Cluster::TYPE_NAME,
            "AWS::SageMaker::Cluster"
        );
        assert!(sagemaker_cluster::Cluster::ATTRIBUTES.contains(&"ClusterArn"));
        assert!(sagemaker_cluster::Cluster::CREATE_ONLY.contains(&"Orchestrator.Eks"));
    }

    #[test]
    fn s3_bucket_with_encryption_and_public_access_block() {
        let bucket = s3_bucket::Bucket {
            bucket_encryption: Some(s3_bucket::BucketEncryption {
                server_side_encryption_configuration: vec![s3_bucket::ServerSideEncryptionRule {
                    server_side_encryption_by_default: Some(
                        s3_bucket::ServerSideEncryptionByDefault {
                            sse_algorithm: "aws:kms".into(),
                            kms_master_key_id: Some(Val::Expr(Expr::get_att("Key", "Arn"))),
                        },
                    ),
                    bucket_key_enabled: Some(true.into()),
                    ..Default::default()
                }],
            }),
            public_access_block_configuration: Some(s3_bucket::PublicAccessBlockConfiguration {
                block_public_acls: Some(true.into()),
                block_public_policy: Some(true.into()),
                ignore_public_acls: Some(true.into()),
                restrict_public_buckets: Some(true.into()),
            }),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&bucket).unwrap(),
            json!({
                "BucketEncryption": {"ServerSideEncryptionConfiguration": [{
                    "BucketKeyEnabled": true,
                    "ServerSideEncryptionByDefault": {
                        "KMSMasterKeyID": {"Fn::GetAtt": ["Key", "Arn"]},
                        "SSEAlgorithm": "aws:kms"
                    }
                }]},
                "PublicAccessBlockConfiguration": {
                    "BlockPublicAcls": true,
                    "BlockPublicPolicy": true,
                    "IgnorePublicAcls": true,
                    "RestrictPublicBuckets": true
                }
            })
        );
        assert!(s3_bucket::Bucket::ATTRIBUTES.contains(&"Arn"));
    }

    #[test]
    fn iam_role_with_policy_document_value() {
        let document = json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Effect": "Allow",
                "Principal": {"Service": "sagemaker.amazonaws.com"},
                "Action": "sts:AssumeRole"
            }]
        });
        let role = iam_role::Role {
            assume_role_policy_document: document.clone(),
            managed_policy_arns: Some(vec![Val::Expr(Expr::sub(
                "arn:${AWS::Partition}:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy",
            ))]),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&role).unwrap(),
            json!({
                "AssumeRolePolicyDocument": document,
                "ManagedPolicyArns": [{"Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy"}]
            })
        );
        assert_eq!(iam_role::Role::TAGS, TagStyle::KeyValueList);
        assert_eq!(ssm_parameter::Parameter::TAGS, TagStyle::Map);
    }
}
