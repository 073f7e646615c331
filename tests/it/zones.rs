//! The load balancer reaches the serving pod in every account: a Network Load Balancer sends
//! traffic only to targets in zones it has a subnet in. Every subnet is placed by zone id, each
//! zone a deploy-time input. A property over every zone id the deployer may give each input:
//! the zones of the Service's load balancer subnets (read from the synthesized Service and
//! templates) include the zone of every subnet the serving nodes launch in. The NetworkPolicy
//! admits exactly the load balancer subnets' blocks.

use crate::reference::CAPACITY_BLOCK_RESERVATION_ID;
use hyperforge::app::Stack;
use hyperforge::constructs::*;
use hyperforge::{App, Code};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// The subnets of a foundation template: `Name` tag -> (the parameter holding its zone id,
/// block, `hyperforge:subnet` tag, logical id). Every subnet is placed by zone id
/// (`AvailabilityZoneId: Ref P`), never by a zone name, which is another zone in each account.
fn subnets(template: &Value) -> BTreeMap<String, (String, String, String, String)> {
    let mut out = BTreeMap::new();
    for (id, r) in template["Resources"].as_object().unwrap() {
        if r["Type"] != "AWS::EC2::Subnet" {
            continue;
        }
        let p = &r["Properties"];
        assert!(
            p.get("AvailabilityZone").is_none(),
            "{id} is placed by name"
        );
        let zone = p["AvailabilityZoneId"]["Ref"]
            .as_str()
            .unwrap_or_else(|| panic!("{id} is not placed by a zone-id input"))
            .to_owned();
        let tag = |key: &str| {
            p["Tags"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["Key"] == key)
                .and_then(|t| t["Value"].as_str())
                .unwrap_or_default()
                .to_owned()
        };
        out.insert(
            tag("Name"),
            (
                zone,
                p["CidrBlock"].as_str().unwrap().to_owned(),
                tag("hyperforge:subnet"),
                id.clone(),
            ),
        );
    }
    out
}

/// What one stack's artifacts say: the load balancer's subnets (by `Name`), the serving
/// nodes' subnets (by `Name`), the NetworkPolicy's admitted blocks, and every subnet.
struct Placement {
    lb: Vec<String>,
    serving: Vec<String>,
    admitted: Vec<String>,
    subnets: BTreeMap<String, (String, String, String, String)>,
}

fn placement(assembly: &hyperforge::Assembly, stack: &str) -> Placement {
    let template = |stage: &str| -> Value {
        let path = crate::common::stage_file(assembly, stack, stage, "template.json");
        serde_json::from_str(assembly.text(&path).unwrap()).unwrap()
    };
    let subnets = subnets(&template("foundation"));
    let mut docs: Vec<Value> = Vec::new();
    for path in assembly.files().keys() {
        if !path.starts_with(&format!("{stack}/"))
            || !path.ends_with(".yaml")
            || path.ends_with(".values.yaml")
        {
            continue;
        }
        for doc in serde_yaml::Deserializer::from_str(assembly.text(path).unwrap()) {
            docs.push(Value::deserialize(doc).unwrap());
        }
    }
    let service = docs
        .iter()
        .find(|d| d["kind"] == "Service" && d["spec"]["type"] == "LoadBalancer")
        .expect("a load-balanced Service");
    let lb: Vec<String> = service["metadata"]["annotations"]
        ["service.beta.kubernetes.io/aws-load-balancer-subnets"]
        .as_str()
        .unwrap()
        .split(", ")
        .map(str::to_owned)
        .collect();
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == service["metadata"]["name"])
        .unwrap();
    let instance_type = deployment["spec"]["template"]["spec"]["nodeSelector"]
        ["node.kubernetes.io/instance-type"]
        .as_str()
        .unwrap();
    let policy = docs
        .iter()
        .find(|d| {
            d["kind"] == "NetworkPolicy"
                && d["metadata"]["namespace"] == service["metadata"]["namespace"]
        })
        .unwrap();
    let admitted: Vec<String> = policy["spec"]["ingress"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|rule| rule["from"].as_array().cloned().unwrap_or_default())
        .filter_map(|peer| peer["ipBlock"]["cidr"].as_str().map(str::to_owned))
        .collect();
    // Serving nodes: a node group whose launch template runs the instance type, or the
    // subnets a Karpenter EC2NodeClass selects.
    let mut serving = Vec::new();
    let nodes = template("nodes");
    let resources = nodes["Resources"].as_object().unwrap();
    for r in resources
        .values()
        .filter(|r| r["Type"] == "AWS::EKS::Nodegroup")
    {
        let lt = r["Properties"]["LaunchTemplate"]["Id"]["Ref"]
            .as_str()
            .unwrap();
        if resources[lt]["Properties"]["LaunchTemplateData"]["InstanceType"] != instance_type {
            continue;
        }
        for s in r["Properties"]["Subnets"].as_array().unwrap() {
            let export = s["Fn::ImportValue"].as_str().unwrap();
            let logical = export.split(':').nth(1).unwrap();
            let name = subnets.iter().find(|(_, v)| v.3 == logical).unwrap().0;
            serving.push(name.clone());
        }
    }
    for class in docs.iter().filter(|d| d["kind"] == "EC2NodeClass") {
        for term in class["spec"]["subnetSelectorTerms"].as_array().unwrap() {
            let role = term["tags"]["hyperforge:subnet"].as_str().unwrap();
            serving.extend(
                subnets
                    .iter()
                    .filter(|(_, v)| v.2 == role)
                    .map(|(name, _)| name.clone()),
            );
        }
    }
    assert!(!serving.is_empty(), "{stack}: no serving subnets found");
    Placement {
        lb,
        serving,
        admitted,
        subnets,
    }
}

/// The property: under every zone id given for each input (one of 4, as us-west-2 has), the
/// load balancer has a subnet in each serving subnet's zone. Returns a counterexample, if any.
fn uncovered(p: &Placement) -> Option<String> {
    const IDS: usize = 4;
    let inputs: Vec<String> = {
        let mut v: Vec<String> = p.subnets.values().map(|(z, ..)| z.clone()).collect();
        v.sort();
        v.dedup();
        v
    };
    for combo in 0..IDS.pow(inputs.len() as u32) {
        let given: BTreeMap<&str, usize> = inputs
            .iter()
            .enumerate()
            .map(|(k, i)| (i.as_str(), combo / IDS.pow(k as u32) % IDS))
            .collect();
        let zone = |name: &str| given[p.subnets[name].0.as_str()];
        let lb: Vec<usize> = p.lb.iter().map(|n| zone(n)).collect();
        for s in &p.serving {
            if !lb.contains(&zone(s)) {
                return Some(format!(
                    "inputs {given:?}: `{s}` is in zone {} and the load balancer in {lb:?}",
                    zone(s)
                ));
            }
        }
    }
    None
}

#[test]
fn the_load_balancer_has_every_serving_zone_whatever_zones_are_given() {
    for (app, stack) in [
        (crate::reference::kimi_k3_eks(), "kimi-k3-eks"),
        (
            crate::reference::kimi_k3_eks_karpenter(),
            "kimi-k3-eks-karpenter",
        ),
    ] {
        let assembly = app.synth().unwrap_or_else(|e| panic!("{e}"));
        let p = placement(&assembly, stack);
        assert_eq!(uncovered(&p), None, "{stack}");
        // The NetworkPolicy admits exactly the load balancer's subnets.
        let blocks: Vec<String> = p.lb.iter().map(|n| p.subnets[n].1.clone()).collect();
        assert_eq!(p.admitted, blocks, "{stack}");
        assert!(
            !p.lb.iter().any(|n| n.contains("-private-")),
            "{stack}: {:?}",
            p.lb
        );
    }
}

/// A load balancer placed in the private subnets (zones 1 and 2) while the nodes run in the
/// Capacity Block's subnet (its own zone input) misses the pod's zone unless the zones given
/// happen to agree: the property finds the values, and validation warns (`HF0426`) with the
/// way out.
#[test]
fn private_subnets_may_miss_the_blocks_zone_and_are_warned_about() {
    let app = |given: bool| {
        let capacity =
            NodeCapacity::capacity_block_of(CAPACITY_BLOCK_RESERVATION_ID, "usw2-az2", 1);
        App::new().stack(crate::fixtures::capacity_block_serving_stack(
            "zones",
            capacity,
            |d, net| {
                if given {
                    d.load_balancer_subnets(&net.private_subnets)
                } else {
                    d
                }
            },
        ))
    };

    let diagnostics = app(true).validate();
    let warning = diagnostics
        .iter()
        .find(|d| d.code == Code::LoadBalancerMissesServingZone)
        .unwrap_or_else(|| panic!("no HF0426 in {diagnostics:?}"));
    assert!(
        warning.message.contains("NetworkGpuSubnetAzId"),
        "{}",
        warning.message
    );
    assert!(warning.help.contains("leave `load_balancer_subnets` out"));
    let p = placement(&app(true).synth().unwrap(), "zones");
    assert!(
        uncovered(&p).is_some(),
        "the property finds the account where it breaks"
    );

    let diagnostics = app(false).validate();
    assert!(!diagnostics
        .iter()
        .any(|d| d.code == Code::LoadBalancerMissesServingZone));
    let p = placement(&app(false).synth().unwrap(), "zones");
    assert_eq!(uncovered(&p), None);
    assert_eq!(p.lb, ["zones-gpu"]);
    assert_eq!(p.admitted, ["100.64.0.0/16"]);
}

/// Every subnet of every reference stack is placed by a zone-id input; the spread zones default
/// to the region's zones where every account can create EKS cluster subnets, and a network
/// asking for more zones than its region has is refused at its field.
#[test]
fn every_subnet_is_placed_by_zone_id_and_spread_zones_come_from_the_region() {
    for app in [
        crate::reference::kimi_k3_eks(),
        crate::reference::kimi_k3_eks_karpenter(),
        crate::reference::kimi_k3_hyperpod(),
    ] {
        let assembly = app.synth().unwrap_or_else(|e| panic!("{e}"));
        let stack = &assembly.manifest().stacks[0];
        let path = crate::common::stage_file(&assembly, &stack.name, "foundation", "template.json");
        let template: Value = serde_json::from_str(assembly.text(&path).unwrap()).unwrap();
        let placed = subnets(&template);
        assert!(placed.len() >= 5, "{}: {placed:?}", stack.name);
        let parameters = &template["Parameters"];
        assert_eq!(parameters["NetworkZone1AzId"]["Default"], "usw2-az1");
        assert_eq!(parameters["NetworkZone2AzId"]["Default"], "usw2-az2");
    }

    let network = |region: &str, zones: u32| {
        let mut stack = Stack::new("zones", region);
        let f = stack.cloudformation_stage("foundation");
        stack.add(f, Network::new("Network").availability_zones(zones));
        App::new().stack(stack)
    };
    // us-west-1: two zones any account has (usw1-az2 takes no EKS cluster subnets).
    let ds = network("us-west-1", 3).validate();
    let refused = ds
        .iter()
        .find(|d| d.code == Code::TooManyAvailabilityZones)
        .unwrap_or_else(|| panic!("{ds:?}"));
    assert!(
        refused.message.contains("usw1-az1, usw1-az3"),
        "{}",
        refused.message
    );
    assert_eq!(refused.field.as_deref(), Some("availability_zones"));
    assert!(!network("us-west-1", 2).validate().has_errors());
    // us-east-1: five, without use1-az3.
    let assembly = network("us-east-1", 5).synth().unwrap();
    let path = crate::common::stage_file(&assembly, "zones", "foundation", "template.json");
    let template: Value = serde_json::from_str(assembly.text(&path).unwrap()).unwrap();
    let defaults: Vec<&str> = (1..=5)
        .map(|i| {
            template["Parameters"][format!("NetworkZone{i}AzId")]["Default"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(
        defaults,
        ["use1-az1", "use1-az2", "use1-az4", "use1-az5", "use1-az6"]
    );
    assert!(network("us-east-1", 6).validate().has_errors());
}
