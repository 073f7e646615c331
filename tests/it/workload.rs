//! The served workload as deployed: properties every reference stack (and the builders at
//! other settings) must keep, read back from the synthesized Kubernetes objects and runbooks.

use crate::reference::{self, kimi_k3_server, CAPACITY_BLOCK_AZ_ID};
use hyperforge::app::Stack;
use hyperforge::constructs::*;
use hyperforge::{App, Assembly};
use serde::Deserialize;
use serde_json::{json, Value};

/// Every reference app with its synthesized assembly.
fn reference_assemblies() -> Vec<(App, Assembly)> {
    reference::all()
        .into_iter()
        .chain(reference::variants())
        .map(|app| {
            let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
            (app, assembly)
        })
        .collect()
}

/// The Kubernetes objects of an assembly's Kubernetes stages (path, object).
fn objects(assembly: &Assembly) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (path, bytes) in assembly.files() {
        if !path.ends_with(".yaml") || path.ends_with(".values.yaml") {
            continue;
        }
        let text = String::from_utf8_lossy(bytes);
        // Documents start at a `---` line of their own; a ConfigMap's file may contain more.
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value = Value::deserialize(doc).unwrap();
            if value.get("kind").is_some() {
                out.push((path.clone(), value));
            }
        }
    }
    out
}

fn of_kind<'a>(objects: &'a [(String, Value)], kind: &str) -> Vec<&'a Value> {
    objects
        .iter()
        .filter(|(_, o)| o["kind"] == kind)
        .map(|(_, o)| o)
        .collect()
}

/// The runbooks of an assembly, one per stack.
fn runbooks(assembly: &Assembly) -> Vec<&str> {
    assembly
        .files()
        .keys()
        .filter(|p| p.ends_with("RUNBOOK.md"))
        .map(|p| assembly.text(p).unwrap())
        .collect()
}

fn secs(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A small EKS stack serving `deployment`.
fn eks_app(deployment: impl FnOnce(&NetworkHandle) -> VllmDeployment) -> App {
    let mut stack = Stack::new("eks", "us-west-2");
    let f = stack.cloudformation_stage("foundation");
    let net = stack.add(f, Network::new("Network").gpu_subnet(CAPACITY_BLOCK_AZ_ID));
    let eks = stack.add(
        f,
        EksCluster::new("Eks", "eks")
            .subnets(&net.private_subnets)
            .vpc(&net.vpc),
    );
    let deployment = deployment(&net);
    // Nodes of the Deployment's type for its replicas, and the device plugin before it.
    let nodes = i64::from(deployment.replica_count().max(1));
    stack.add(
        f,
        ManagedNodeGroup::gpu(
            "Gpu",
            &eks.cluster,
            deployment.instance_type(),
            net.gpu_subnet.iter(),
        )
        .scaling(0, nodes, nodes),
    );
    stack.helm_stage("nvidia-device-plugin", HelmRelease::nvidia_device_plugin());
    let w = stack.kubernetes_stage("workload");
    stack.add(w, deployment);
    App::new().stack(stack)
}

// F4: the progress deadline outlasts the startup probe.

/// The startup probe's allowance of a Deployment's (only) container, seconds.
fn startup_allowance(deployment: &Value) -> u64 {
    let probe = &deployment["spec"]["template"]["spec"]["containers"][0]["startupProbe"];
    secs(&probe["periodSeconds"]) * secs(&probe["failureThreshold"])
        + probe["initialDelaySeconds"].as_u64().unwrap_or(0)
}

#[test]
fn every_deployment_outlasts_its_startup_budget_and_the_runbook_waits_for_it() {
    // The EKS references stream the staged copy from S3.
    let store = hyperforge::constructs::ModelStoreHandle {
        id: "Weights".to_owned(),
        bucket_name: "kimi-k3-eks-weights-111122223333-us-west-2".into(),
        bucket: hyperforge::app::Ref::new("kimi-k3-eks", "Weights/Bucket"),
        stager_namespace: "model-weights".to_owned(),
        stager_service_account: "weights-stager".to_owned(),
    };
    let budget = kimi_k3_server()
        .weights_from(&store)
        .startup_budget("p6-b300.48xlarge", false)
        .unwrap()
        .total_secs;
    let mut seen = 0;
    for (_, assembly) in reference_assemblies() {
        let objects = objects(&assembly);
        let books = runbooks(&assembly);
        for d in of_kind(&objects, "Deployment") {
            seen += 1;
            let deadline = secs(&d["spec"]["progressDeadlineSeconds"]);
            let allowance = startup_allowance(d);
            assert!(
                allowance >= budget,
                "probe {allowance} s < budget {budget} s"
            );
            assert!(
                deadline > allowance,
                "progress deadline {deadline} s does not outlast the startup probe ({allowance} s)"
            );
            let name = d["metadata"]["name"].as_str().unwrap();
            let wait = format!("kubectl rollout status deployment/{name} ");
            let line = books
                .iter()
                .flat_map(|b| b.lines())
                .find(|l| l.starts_with(&wait))
                .unwrap_or_else(|| panic!("no rollout wait for {name}"));
            let timeout: u64 = line
                .rsplit("--timeout=")
                .next()
                .and_then(|t| t.strip_suffix('s'))
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("no timeout in `{line}`"));
            assert!(
                timeout >= deadline,
                "the runbook waits {timeout} s, less than the progress deadline {deadline} s"
            );
        }
    }
    assert!(seen >= 2, "the EKS references have Deployments");
}

#[test]
fn the_progress_deadline_follows_the_budget_at_any_throughput() {
    for (download, weights) in [
        (50e6, 1_560_936_091_448u64),
        (500e6, 1_560_936_091_448),
        (5e9, 1_000_000_000),
        (1e6, 1 << 40),
    ] {
        let server = kimi_k3_server()
            .weight_bytes(weights)
            .storage_throughput(StorageThroughput {
                download_bytes_per_sec: download,
                ..StorageThroughput::default()
            });
        let budget = server
            .startup_budget("p6-b300.48xlarge", false)
            .unwrap()
            .total_secs;
        let app = eks_app(|_| {
            VllmDeployment::new("Vllm", server, "p6-b300.48xlarge").cluster_ip_service()
        });
        let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
        let objects = objects(&assembly);
        let d = of_kind(&objects, "Deployment")[0];
        let deadline = secs(&d["spec"]["progressDeadlineSeconds"]);
        let allowance = startup_allowance(d);
        assert!(
            allowance >= budget.min(i32::MAX as u64),
            "{download}: {allowance} < {budget}"
        );
        assert!(
            deadline > allowance,
            "{download}: {deadline} <= {allowance}"
        );
    }
}

// F9: the load balancer checks vLLM's health endpoint, not just the open port.

#[test]
fn load_balancers_check_health_over_http_on_the_serving_port() {
    let mut seen = 0;
    for (_, assembly) in reference_assemblies() {
        let objects = objects(&assembly);
        for svc in of_kind(&objects, "Service") {
            if svc["spec"]["type"] != "LoadBalancer" {
                continue;
            }
            seen += 1;
            let a = &svc["metadata"]["annotations"];
            let key = |k: &str| format!("service.beta.kubernetes.io/aws-load-balancer-{k}");
            assert_eq!(a[key("healthcheck-protocol")], "http", "{a}");
            assert_eq!(a[key("healthcheck-path")], "/health", "{a}");
            assert_eq!(a[key("nlb-target-type")], "ip", "{a}");
            // For ip targets the traffic port is the pod port the Service targets: 8000.
            assert_eq!(a[key("healthcheck-port")], "traffic-port", "{a}");
            let target = &svc["spec"]["ports"][0]["targetPort"];
            let selector = svc["spec"]["selector"].as_object().unwrap();
            // The pods serving the API: a Deployment's, or a LeaderWorkerSet's leaders (the
            // leader's index label is the controller's, on its pods, not in the template).
            let templates: Vec<&Value> = of_kind(&objects, "Deployment")
                .into_iter()
                .map(|d| &d["spec"]["template"])
                .chain(
                    of_kind(&objects, "LeaderWorkerSet")
                        .into_iter()
                        .map(|g| &g["spec"]["leaderWorkerTemplate"]["leaderTemplate"]),
                )
                .collect();
            let template = templates
                .into_iter()
                .find(|t| {
                    selector.iter().all(|(k, v)| {
                        k == "leaderworkerset.sigs.k8s.io/worker-index"
                            || t["metadata"]["labels"][k.as_str()] == *v
                    })
                })
                .expect("the Service selects a Deployment's or a group leader's pods");
            let port = template["spec"]["containers"][0]["ports"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == *target || p["containerPort"] == *target)
                .expect("the target port is a container port");
            assert_eq!(port["containerPort"], 8000);
        }
    }
    assert!(seen >= 2, "the EKS references have load balancers");
}

// F7: remote code runs from one pinned commit.

fn arg_after<'a>(args: &'a [Value], flag: &str) -> Option<&'a str> {
    let i = args.iter().position(|a| a == flag)?;
    args.get(i + 1)?.as_str()
}

fn is_commit(sha: &str) -> bool {
    sha.len() == 40 && sha.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[test]
fn remote_code_is_pinned_to_one_commit_on_both_paths() {
    let (mut deployments, mut endpoints) = (0, 0);
    for (_, assembly) in reference_assemblies() {
        let objects = objects(&assembly);
        for d in of_kind(&objects, "Deployment") {
            deployments += 1;
            let args = d["spec"]["template"]["spec"]["containers"][0]["args"]
                .as_array()
                .unwrap();
            assert!(args.iter().any(|a| a == "--trust-remote-code"));
            // The references serve the staged copy: the revision is its prefix (weights and
            // code both come from there); from the Hub, `--revision` and `--code-revision` pin it.
            let model = arg_after(args, "--model").expect("--model");
            match model.strip_prefix("s3://") {
                Some(url) => {
                    let revision = url
                        .strip_suffix('/')
                        .and_then(|u| u.rsplit_once("/moonshotai/Kimi-K3/"))
                        .map(|(_, r)| r)
                        .unwrap_or_else(|| panic!("{model} is not a revision prefix"));
                    assert!(is_commit(revision), "{revision}");
                    assert_eq!(arg_after(args, "--revision"), None);
                }
                None => {
                    let revision = arg_after(args, "--revision").expect("--revision");
                    assert!(is_commit(revision), "{revision}");
                    assert_eq!(arg_after(args, "--code-revision"), Some(revision));
                    assert_eq!(model, "moonshotai/Kimi-K3");
                }
            }
        }
        for iec in of_kind(&objects, "InferenceEndpointConfig") {
            endpoints += 1;
            let source = &iec["spec"]["modelSourceConfig"];
            let sha = match source["modelSourceType"].as_str() {
                // The staged copy's prefix ends with the revision.
                Some("s3") => source["modelLocation"]
                    .as_str()
                    .and_then(|l| l.strip_prefix("moonshotai/Kimi-K3/"))
                    .expect("modelLocation"),
                _ => source["huggingFaceModel"]["commitSHA"]
                    .as_str()
                    .expect("commitSHA"),
            };
            assert!(is_commit(sha), "{sha}");
            // The worker serves the operator's copy, already at that commit.
            let args = iec["spec"]["worker"]["args"].as_array().unwrap();
            assert_eq!(arg_after(args, "--model"), Some("/opt/ml/model"));
        }
        for book in runbooks(&assembly) {
            if book.contains("--trust-remote-code") || book.contains("kubectl apply") {
                assert!(
                    book.contains("/revision/main"),
                    "the runbook shows how to find the commit"
                );
            }
        }
    }
    assert!(deployments >= 2 && endpoints >= 1);
}

#[test]
fn revisions_must_be_commits_and_remote_code_without_one_is_reported() {
    let server = || {
        VllmServer::new("moonshotai/Kimi-K3", "vllm/vllm-openai:kimi-k3").trust_remote_code(true)
    };
    for bad in [
        "main",
        "v1.0",
        "0123456789ABCDEF0123456789ABCDEF01234567",
        "0123abc",
    ] {
        let app =
            eks_app(|_| VllmDeployment::new("Vllm", server().revision(bad), "p6-b300.48xlarge"));
        let err = app.synth().unwrap_err();
        assert!(
            err.contains(hyperforge::Code::InvalidModelRevision, "eks/Vllm"),
            "{bad}: {err}"
        );
    }
    let app =
        eks_app(|_| VllmDeployment::new("Vllm", server(), "p6-b300.48xlarge").cluster_ip_service());
    let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
    assert!(
        assembly
            .warnings()
            .contains(hyperforge::Code::UnpinnedRemoteCode, "eks/Vllm"),
        "{}",
        assembly.warnings()
    );
    let app = eks_app(|_| {
        VllmDeployment::new(
            "Vllm",
            server().revision("89abcdef0123456789abcdef0123456789abcdef"),
            "p6-b300.48xlarge",
        )
        .cluster_ip_service()
    });
    let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
    assert!(!assembly
        .warnings()
        .iter()
        .any(|d| d.code == hyperforge::Code::UnpinnedRemoteCode));
}

// S2: the HyperPod worker serves the copy the operator's init container downloaded; S1: shared
// memory for tensor parallelism.

#[test]
fn the_hyperpod_worker_serves_the_prefetched_copy_and_the_runbook_checks_shared_memory() {
    let mut seen = 0;
    for (_, assembly) in reference_assemblies() {
        let objects = objects(&assembly);
        for iec in of_kind(&objects, "InferenceEndpointConfig") {
            seen += 1;
            let source = &iec["spec"]["modelSourceConfig"];
            // The reference serves the staged copy, fetched from the stack's model store.
            assert_eq!(source["modelSourceType"], "s3");
            assert_eq!(source["s3Storage"]["region"], "us-west-2");
            assert!(source["s3Storage"]["bucketName"]
                .as_str()
                .is_some_and(|b| b.ends_with("-weights-111122223333-us-west-2")));
            // Without prefetch the operator leaves the fetch to the server, and the mount the
            // server reads would be empty.
            assert_eq!(source["prefetchEnabled"], true);
            let worker = &iec["spec"]["worker"];
            let mount = worker["modelVolumeMount"]["mountPath"].as_str().unwrap();
            let args = worker["args"].as_array().unwrap();
            assert_eq!(arg_after(args, "--model"), Some(mount));
            let name = iec["metadata"]["name"].as_str().unwrap();
            assert!(runbooks(&assembly)
                .iter()
                .any(|b| b.contains("df -h /dev/shm") && b.contains(&format!("grep {name}"))));
        }
        for d in of_kind(&objects, "Deployment") {
            let pod = &d["spec"]["template"]["spec"];
            let mount = pod["containers"][0]["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["mountPath"] == "/dev/shm")
                .expect("a /dev/shm mount");
            let volume = pod["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == mount["name"])
                .unwrap();
            assert_eq!(volume["emptyDir"]["medium"], "Memory");
        }
    }
    assert!(seen >= 1);
}

// F14: the API key comes from a Secret, the NetworkPolicy admits only the load balancer and
// named clients, and the VPC CNI enforces it.

/// The `Name` tag and block of every subnet in the assembly's CloudFormation templates.
fn template_subnets(assembly: &Assembly) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (path, bytes) in assembly.files() {
        if !path.ends_with(".template.json") {
            continue;
        }
        let t: Value = serde_json::from_slice(bytes).unwrap();
        for r in t["Resources"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, r)| r)
        {
            if r["Type"] != "AWS::EC2::Subnet" {
                continue;
            }
            let name = r["Properties"]["Tags"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["Key"] == "Name")
                .and_then(|t| t["Value"].as_str())
                .unwrap()
                .to_owned();
            out.push((
                name,
                r["Properties"]["CidrBlock"].as_str().unwrap().to_owned(),
            ));
        }
    }
    out
}

fn api_key_env(env: &Value) -> &Value {
    env.as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "VLLM_API_KEY")
        .expect("VLLM_API_KEY")
}

#[test]
fn the_api_key_is_read_from_a_secret_on_both_paths() {
    let mut seen = 0;
    for (_, assembly) in reference_assemblies() {
        let objects = objects(&assembly);
        let envs = of_kind(&objects, "Deployment")
            .into_iter()
            .map(|d| {
                (
                    &d["spec"]["template"]["spec"]["containers"][0]["env"],
                    &d["spec"]["template"]["spec"]["containers"][0]["args"],
                )
            })
            .chain(
                of_kind(&objects, "InferenceEndpointConfig")
                    .into_iter()
                    .map(|i| {
                        (
                            &i["spec"]["worker"]["environmentVariables"],
                            &i["spec"]["worker"]["args"],
                        )
                    }),
            );
        for (env, args) in envs {
            seen += 1;
            let key = api_key_env(env);
            assert!(key.get("value").is_none(), "{key}");
            let secret = &key["valueFrom"]["secretKeyRef"];
            assert_eq!(secret["name"], reference::API_KEY_SECRET);
            assert_eq!(secret["key"], reference::API_KEY_SECRET_KEY);
            assert!(!args.as_array().unwrap().iter().any(|a| a == "--api-key"));
        }
        for book in runbooks(&assembly) {
            assert!(book.contains(&format!(
                "kubectl create secret generic {}",
                reference::API_KEY_SECRET
            )));
        }
    }
    assert!(seen >= 3);
}

#[test]
fn the_network_policy_admits_only_the_load_balancer_subnets_and_named_clients() {
    let mut seen = 0;
    for (_, assembly) in reference_assemblies() {
        let objects = objects(&assembly);
        let subnets = template_subnets(&assembly);
        for policy in of_kind(&objects, "NetworkPolicy") {
            seen += 1;
            let name = policy["metadata"]["name"].as_str().unwrap();
            let svc = of_kind(&objects, "Service")
                .into_iter()
                .find(|s| s["metadata"]["name"] == name)
                .unwrap();
            let placed: Vec<&str> = svc["metadata"]["annotations"]
                ["service.beta.kubernetes.io/aws-load-balancer-subnets"]
                .as_str()
                .expect("the load balancer's subnets are named")
                .split(", ")
                .collect();
            let mut expected: Vec<&str> = placed
                .iter()
                .map(|n| {
                    subnets
                        .iter()
                        .find(|(name, _)| name == n)
                        .unwrap_or_else(|| panic!("no subnet named {n}"))
                        .1
                        .as_str()
                })
                .collect();
            expected.sort();
            let rules = policy["spec"]["ingress"].as_array().unwrap();
            // A group's pods (a LeaderWorkerSet's) reach each other on every port, and no
            // other pod does: the rule's one peer is the policy's own pod selector.
            let grouped = of_kind(&objects, "LeaderWorkerSet")
                .iter()
                .any(|g| g["metadata"]["name"] == name);
            let mut admitted = Vec::new();
            for rule in rules {
                let from = rule["from"]
                    .as_array()
                    .expect("every rule names its sources");
                assert!(!from.is_empty());
                if grouped && from[0].get("podSelector").is_some() {
                    assert_eq!(from.len(), 1, "{name}");
                    assert_eq!(
                        from[0]["podSelector"], policy["spec"]["podSelector"],
                        "{name}"
                    );
                    assert!(rule.get("ports").is_none(), "{name}");
                    continue;
                }
                assert_eq!(rule["ports"][0]["port"], 8000);
                for peer in from {
                    admitted.push(
                        peer["ipBlock"]["cidr"]
                            .as_str()
                            .expect("only address blocks"),
                    );
                    assert!(peer["ipBlock"].get("except").is_none());
                }
            }
            admitted.sort();
            assert_eq!(admitted, expected, "{name}");
        }
    }
    assert!(seen >= 2);
}

#[test]
fn clients_are_admitted_by_namespace_and_labels_and_a_cluster_ip_service_admits_no_one_else() {
    let app = eks_app(|_| {
        VllmDeployment::new("Vllm", kimi_k3_server(), "p6-b300.48xlarge")
            .cluster_ip_service()
            .allow_namespace("gateway")
            .allow_pods("apps", [("app.kubernetes.io/name", "chat")])
    });
    let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
    let objects = objects(&assembly);
    let policy = of_kind(&objects, "NetworkPolicy")[0];
    let rules = policy["spec"]["ingress"].as_array().unwrap();
    assert_eq!(
        rules.len(),
        1,
        "no load balancer rule for a ClusterIP Service"
    );
    let from = rules[0]["from"].as_array().unwrap();
    assert_eq!(
        from[0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "gateway"
    );
    assert!(from[0].get("podSelector").is_none());
    assert_eq!(
        from[1]["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
        "chat"
    );
    let svc = of_kind(&objects, "Service")[0];
    assert!(svc["metadata"].get("annotations").is_none_or(|a| a
        .get("service.beta.kubernetes.io/aws-load-balancer-subnets")
        .is_none()));

    // An internal load balancer given no subnets goes where the serving nodes run (the GPU
    // subnet), and the NetworkPolicy admits that block alone.
    let app = eks_app(|_| VllmDeployment::new("Vllm", kimi_k3_server(), "p6-b300.48xlarge"));
    let assembly = app.synth().unwrap_or_else(|d| panic!("{d}"));
    let derived = self::objects(&assembly);
    let svc = of_kind(&derived, "Service")[0];
    assert_eq!(
        svc["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-subnets"],
        "eks-gpu"
    );
    let policy = of_kind(&derived, "NetworkPolicy")[0];
    assert_eq!(
        policy["spec"]["ingress"][0]["from"],
        json!([{"ipBlock": {"cidr": "100.64.0.0/16"}}])
    );
    // An internet-facing one needs public subnets, given: none is derived.
    let app = eks_app(|_| {
        VllmDeployment::new("Vllm", kimi_k3_server(), "p6-b300.48xlarge")
            .internet_facing_load_balancer()
    });
    let err = app.synth().unwrap_err();
    assert!(
        err.contains(hyperforge::Code::LoadBalancerSubnets, "eks/Vllm"),
        "{err}"
    );
    let app = eks_app(|net| {
        VllmDeployment::new("Vllm", kimi_k3_server(), "p6-b300.48xlarge")
            .internet_facing_load_balancer()
            .load_balancer_subnets(&net.private_subnets)
    });
    let err = app.synth().unwrap_err();
    assert!(
        err.contains(hyperforge::Code::LoadBalancerSubnets, "eks/Vllm"),
        "{err}"
    );
    let app = eks_app(|net| {
        VllmDeployment::new("Vllm", kimi_k3_server(), "p6-b300.48xlarge")
            .internet_facing_load_balancer()
            .load_balancer_subnets(&net.public_subnets)
    });
    app.synth().unwrap_or_else(|d| panic!("{d}"));
}

#[test]
fn the_vpc_cni_enforces_network_policies_in_both_backends() {
    for (_, assembly) in reference_assemblies() {
        let mut cfn = 0;
        let mut tf = 0;
        for (path, bytes) in assembly.files() {
            if path.ends_with(".template.json") {
                let t: Value = serde_json::from_slice(bytes).unwrap();
                for r in t["Resources"].as_object().unwrap().values() {
                    if r["Type"] == "AWS::EKS::Addon" && r["Properties"]["AddonName"] == "vpc-cni" {
                        cfn += 1;
                        let values: Value = serde_json::from_str(
                            r["Properties"]["ConfigurationValues"].as_str().unwrap(),
                        )
                        .unwrap();
                        assert_eq!(values["enableNetworkPolicy"], "true");
                    }
                }
            } else if path.ends_with("main.tf.json") {
                let m: Value = serde_json::from_slice(bytes).unwrap();
                // Phases without add-ons (the Helm ones) have none.
                let Some(addons) = m["resource"]["aws_eks_addon"].as_object() else {
                    continue;
                };
                for (name, r) in addons {
                    if r["addon_name"] == "vpc-cni" {
                        tf += 1;
                        let local = r["configuration_values"]
                            .as_str()
                            .unwrap()
                            .trim_start_matches("${jsonencode(local.")
                            .trim_end_matches(")}");
                        assert_eq!(m["locals"][local]["enableNetworkPolicy"], "true", "{name}");
                    }
                }
            }
        }
        assert_eq!((cfn, tf), (1, 1));
    }
}

// F15: the image is pinned by digest and pulled once per node.

#[test]
fn images_are_pinned_by_digest_and_pulled_only_when_missing() {
    let mut seen = 0;
    for (_, assembly) in reference_assemblies() {
        let objects = objects(&assembly);
        let images = of_kind(&objects, "Deployment")
            .into_iter()
            .map(|d| {
                let c = &d["spec"]["template"]["spec"]["containers"][0];
                assert_eq!(c["imagePullPolicy"], "IfNotPresent");
                assert!(d["metadata"]["annotations"]
                    .as_object()
                    .unwrap()
                    .values()
                    .all(|v| !v.as_str().unwrap().starts_with("CKV_K8S_43")));
                &c["image"]
            })
            .chain(
                of_kind(&objects, "InferenceEndpointConfig")
                    .into_iter()
                    .map(|i| &i["spec"]["worker"]["image"]),
            );
        for image in images {
            seen += 1;
            let (_, digest) = image.as_str().unwrap().split_once('@').expect("a digest");
            let hex = digest.strip_prefix("sha256:").unwrap();
            assert!(hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
        }
        for book in runbooks(&assembly) {
            assert!(book.contains("docker buildx imagetools inspect"));
        }
    }
    assert!(seen >= 3);
}

#[test]
fn a_mutable_tag_warns_a_bad_digest_is_refused_and_always_pull_is_asked_for() {
    let with = |server: VllmServer| {
        eks_app(|_| {
            VllmDeployment::new("Vllm", server, "p6-b300.48xlarge")
                .cluster_ip_service()
                .always_pull_image(true)
        })
    };
    let tagged = VllmServer::new("moonshotai/Kimi-K3", "vllm/vllm-openai:kimi-k3");
    let assembly = with(tagged.clone())
        .synth()
        .unwrap_or_else(|d| panic!("{d}"));
    assert!(
        assembly
            .warnings()
            .contains(hyperforge::Code::ImageNotPinnedByDigest, "eks/Vllm"),
        "{}",
        assembly.warnings()
    );
    let tagged_objects = objects(&assembly);
    let c = &of_kind(&tagged_objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(c["image"], "vllm/vllm-openai:kimi-k3");

    let digest = format!("sha256:{}", "ab".repeat(32));
    let pinned = with(tagged.clone().image_digest(&digest))
        .synth()
        .unwrap_or_else(|d| panic!("{d}"));
    assert!(!pinned
        .warnings()
        .iter()
        .any(|d| d.code == hyperforge::Code::ImageNotPinnedByDigest));
    let objects = objects(&pinned);
    let c = &of_kind(&objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], format!("vllm/vllm-openai:kimi-k3@{digest}"));

    for bad in [
        tagged.clone().image_digest("sha256:abc"),
        tagged.clone().image_digest(digest.to_ascii_uppercase()),
        VllmServer::new("moonshotai/Kimi-K3", format!("vllm/vllm-openai@{digest}"))
            .image_digest(&digest),
    ] {
        let err = with(bad).synth().unwrap_err();
        assert!(
            err.contains(hyperforge::Code::InvalidImageDigest, "eks/Vllm"),
            "{err}"
        );
    }
}

/// An image with shell or YAML syntax in it is refused at its line, before anything is built:
/// it would be written into the manifests and the runbook's commands.
#[test]
fn a_hostile_image_is_refused_before_synthesis() {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{root}/stacks/kimi-k3-eks.yaml")).unwrap();
    let line = "          image: vllm/vllm-openai:v0.27.0\n";
    assert!(text.contains(line), "stack file layout changed");
    for image in [
        "\"vllm/vllm-openai:kimi-k3$(id)\"",
        "\"vllm/vllm openai\"",
        "\"x/y:`id`\"",
    ] {
        let bad = text.replace(line, &format!("          image: {image}\n"));
        let result = hyperforge::stackfile::load_str("stacks/kimi-k3-eks.yaml", &bad)
            .and_then(|app| app.synth().map(|_| ()));
        let Err(ds) = result else {
            panic!("{image} was accepted");
        };
        let d = ds
            .iter()
            .find(|d| d.code == hyperforge::Code::InvalidImageReference)
            .unwrap_or_else(|| panic!("{image}: no HF0421 in\n{ds}"));
        assert!(d.path.starts_with("stacks/kimi-k3-eks.yaml:"), "{d}");
    }
}
