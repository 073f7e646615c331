//! The generated runbooks refer only to what the assembly holds: every artifact path and every
//! CloudFormation stack name they mention exists, and they say how to reach the model.

use hyperforge::reference;
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
            for n in &names {
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
            assert!(
                !text.contains("{{") && !text.contains("&quot;"),
                "rendered, not escaped"
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
    assert!(text.contains("192 vCPU per instance"));

    let eks = reference::kimi_k3_eks().synth().unwrap();
    let text = eks.text("kimi-k3-eks/RUNBOOK.md").unwrap();
    assert!(text.contains("aws ec2 describe-capacity-block-offerings"));
    assert!(text.contains("aws ec2 purchase-capacity-block"));
    assert!(text.contains("kubectl rollout status deployment/kimi-k3 -n kimi-k3 --timeout=8160s"));
    assert!(text.contains("kubectl port-forward svc/kimi-k3 8000:8000 -n kimi-k3"));
    assert!(text.contains("--set vpcId=$(aws cloudformation describe-stacks"));
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
    // Cleanup runs in reverse: the workload goes before the node groups' stack.
    let workload = text
        .rfind("kubectl delete -f kimi-k3-eks/05-workload.yaml")
        .unwrap();
    let nodes = text
        .rfind("delete-stack --region us-west-2 --stack-name kimi-k3-eks-nodes")
        .unwrap();
    assert!(workload < nodes);
}
