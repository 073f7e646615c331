//! Policy packs in-process: the vendored Guard rules over every reference stack (zero
//! unacknowledged findings, every acknowledgement with a reason), and deliberately bad input as
//! the negative control.

use crate::reference;
use hyperforge::policy::{PolicyPack, RuleFile};
use hyperforge::{Code, Diagnostic};
use serde_json::Value;

/// A pack of one rule file, `origin`, holding `text`.
fn one_file(origin: &str, text: impl Into<String>) -> PolicyPack {
    PolicyPack {
        name: origin.trim_end_matches(".guard").into(),
        rules: vec![RuleFile {
            origin: origin.into(),
            text: text.into(),
        }],
    }
}

/// The rule files of `pack` refused (HF1002) over the EKS reference stack's templates.
fn refusals(assembly: &hyperforge::Assembly, pack: &PolicyPack) -> Vec<Diagnostic> {
    assembly
        .check_policies(pack)
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::PolicyRuleInvalid)
        .cloned()
        .collect()
}

#[test]
fn reference_stacks_pass_the_vendored_packs() {
    let pack = PolicyPack::all_builtin();
    let mut findings = Vec::new();
    for app in reference::all().into_iter().chain(reference::variants()) {
        let assembly = app.synth().expect("reference stacks synthesize");
        let report = assembly.check_policies(&pack);
        for s in &report.stacks {
            eprintln!(
                "{}: {} templates x {} rule files in {} ms",
                s.stack,
                s.templates,
                report.rule_files,
                s.elapsed.as_millis()
            );
        }
        findings.extend(report.diagnostics.iter().map(|d| d.to_string()));
    }
    assert!(
        findings.is_empty(),
        "{} findings:\n{}",
        findings.len(),
        findings.join("\n")
    );
}

/// Every acknowledgement is written into each tool's form with a reason.
#[test]
fn acknowledgements_carry_reasons_in_every_tool_form() {
    let assembly = reference::kimi_k3_hyperpod().synth().unwrap();
    let mut guard_suppressions = 0;
    for (path, bytes) in assembly.files() {
        if !path.ends_with(".template.json") {
            continue;
        }
        let t: Value = serde_json::from_slice(bytes).unwrap();
        for (id, r) in t["Resources"].as_object().unwrap() {
            let m = &r["Metadata"];
            for skip in m["checkov"]["skip"].as_array().into_iter().flatten() {
                let reason = skip["comment"].as_str().unwrap_or_default();
                assert!(
                    reason.len() > 40,
                    "{path} {id}: checkov skip without reason"
                );
            }
            for tool in ["cfn_nag", "cdk_nag"] {
                for s in m[tool]["rules_to_suppress"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    let reason = s["reason"].as_str().unwrap_or_default();
                    assert!(
                        reason.len() > 40,
                        "{path} {id}: {tool} suppression without reason"
                    );
                }
            }
            for rule in m["guard"]["SuppressedRules"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let reason = m["guard"]["SuppressionReasons"][rule.as_str().unwrap()]
                    .as_str()
                    .unwrap_or_default();
                assert!(
                    reason.len() > 40,
                    "{path} {id}: Guard suppression without reason"
                );
                guard_suppressions += 1;
            }
        }
    }
    assert!(guard_suppressions > 0);
}

/// The negative control: an open, unencrypted bucket without a TLS-only policy fails the
/// registry's rules, at its construct path, with the rule's fix.
#[test]
fn a_bad_template_yields_the_expected_findings() {
    let assembly = reference::kimi_k3_eks().synth().unwrap();
    let template = r#"{
        "Resources": {
            "Open": {
                "Type": "AWS::S3::Bucket",
                "Metadata": {"hyperforge:path": "bad/Open"},
                "Properties": {}
            },
            "OpenPolicy": {
                "Type": "AWS::S3::BucketPolicy",
                "Metadata": {"hyperforge:path": "bad/OpenPolicy"},
                "Properties": {
                    "Bucket": {"Ref": "Open"},
                    "PolicyDocument": {"Statement": [{"Effect": "Allow", "Principal": "*",
                        "Action": "s3:GetObject", "Resource": "*"}]}
                }
            }
        }
    }"#;
    let report = hyperforge::policy::check_templates(
        &[("bad.template.json", template)],
        &PolicyPack::builtin("wa-security-pillar").unwrap(),
    );
    let found = |rule: &str, path: &str| {
        report.iter().any(|d| {
            d.code == Code::PolicyViolation && d.path == path && d.message.starts_with(rule)
        })
    };
    assert!(found("S3_BUCKET_LOGGING_ENABLED", "bad/Open"), "{report}");
    assert!(
        found("S3_BUCKET_VERSIONING_ENABLED", "bad/Open"),
        "{report}"
    );
    assert!(
        found("S3_BUCKET_SSL_REQUESTS_ONLY", "bad.template.json"),
        "{report}"
    );
    let logging = report
        .iter()
        .find(|d| d.message.starts_with("S3_BUCKET_LOGGING_ENABLED"))
        .unwrap();
    assert!(logging.help.contains("LoggingConfiguration"), "{logging}");
    // The same rules are quiet on the reference stack itself.
    assert!(assembly
        .check_policies(&PolicyPack::builtin("wa-security-pillar").unwrap())
        .diagnostics
        .is_empty());
}

/// The user's own rules: a file that fails on the reference stack, and one Guard cannot parse.
#[test]
fn user_rule_files() {
    let assembly = reference::kimi_k3_eks().synth().unwrap();
    let pack = PolicyPack {
        name: "mine".into(),
        rules: vec![
            RuleFile {
                origin: "mine/no_nat.guard".into(),
                text: "rule NO_NAT_GATEWAYS {\n  Resources.*[ Type == 'AWS::EC2::NatGateway' ] empty\n  <<\n    Violation: NAT gateways cost money.\n    Fix: Use VPC endpoints.\n  >>\n}\n".into(),
            },
            RuleFile {
                origin: "mine/broken.guard".into(),
                text: "rule BROKEN { Resources.*[ Type == ] }\n".into(),
            },
        ],
    };
    let report = assembly.check_policies(&pack).diagnostics;
    assert!(
        report.iter().any(|d| d.code == Code::PolicyViolation
            && d.message.starts_with("NO_NAT_GATEWAYS")
            && d.help == "Use VPC endpoints."),
        "{report}"
    );
    assert!(
        report
            .iter()
            .any(|d| d.code == Code::PolicyRuleInvalid && d.path == "mine/broken.guard"),
        "{report}"
    );
}

/// A rules argument that is not a regular file (a FIFO would block for ever, a directory named
/// `x.guard` is not rules) or holds far more text than rules need is refused before reading.
#[test]
fn odd_rule_paths_are_refused_before_reading() {
    use hyperforge::policy::{PolicyError, MAX_RULE_BYTES};
    let dir = tempfile::tempdir().unwrap();
    let good = "rule ok { Resources.*.Type exists }\n";
    std::fs::write(dir.path().join("a.guard"), good).unwrap();
    std::fs::create_dir(dir.path().join("sub.guard")).unwrap();
    let Err(e) = PolicyPack::from_path(dir.path()) else {
        panic!("a directory named .guard was read as rules");
    };
    assert!(matches!(e, PolicyError::NotAFile(_)), "{e}");

    let fifo = dir.path().join("pipe.guard");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let Err(e) = PolicyPack::from_path(&fifo) else {
        panic!("a FIFO was read as rules");
    };
    assert!(matches!(e, PolicyError::NotAFile(_)), "{e}");

    let big = dir.path().join("big.guard");
    std::fs::write(&big, vec![b'#'; MAX_RULE_BYTES as usize + 1]).unwrap();
    let Err(e) = PolicyPack::from_path(&big) else {
        panic!("{} bytes of rules were read", MAX_RULE_BYTES + 1);
    };
    assert!(matches!(e, PolicyError::TooLarge { .. }), "{e}");

    let only = dir.path().join("only");
    std::fs::create_dir(&only).unwrap();
    std::fs::write(only.join("a.guard"), good).unwrap();
    assert_eq!(PolicyPack::from_path(&only).unwrap().rules.len(), 1);
}

/// Rule text nested to the bound reaches Guard and is evaluated without exhausting the stack;
/// one level more is an HF1002 for that file alone, before Guard parses it.
#[test]
fn rule_nesting_is_bounded_before_guard_parses() {
    use hyperforge::policy::{rule_nesting, MAX_RULE_NESTING};
    let assembly = reference::kimi_k3_eks().synth().unwrap();
    let nested = |levels: usize| {
        // The rule's own braces are one level.
        let lists = levels - 1;
        format!(
            "rule NESTED {{ Resources.*.Type !in {}'x'{} }}\n",
            "[".repeat(lists),
            "]".repeat(lists)
        )
    };
    assert_eq!(rule_nesting(&nested(MAX_RULE_NESTING)), MAX_RULE_NESTING);
    // Brackets in strings and comments do not count.
    assert_eq!(rule_nesting("rule A { x == '[[[' } # ((((\n"), 1);
    for (levels, refused) in [(MAX_RULE_NESTING, false), (MAX_RULE_NESTING + 1, true)] {
        let report = refusals(&assembly, &one_file("nested.guard", nested(levels)));
        let bounded = report.iter().any(|d| d.message.contains("levels deep"));
        assert_eq!(bounded, refused, "{levels} levels: {report:?}");
    }
}

/// A `let` variable whose value refers to itself (directly or through another) makes Guard
/// recurse until the stack overflows; such a file is HF1002 before Guard sees it. Rules that
/// only read variables defined before them are evaluated as before.
#[test]
fn self_referring_variables_are_refused_before_guard_runs() {
    use hyperforge::policy::variable_cycle;
    let direct = "let lc = Resources.*[ Type == 'AWS::AutoScaling::LaunchConfiguration'\n  %lc.Properties exists\n]\nrule R when %lc !empty { %lc.Properties { X exists } }\n";
    assert_eq!(variable_cycle(direct).as_deref(), Some("lc -> lc"));
    let mutual = "let a = %b\nlet b = Resources.*[ %a.Type == 'x' ]\nrule R { %a !empty }\n";
    assert_eq!(variable_cycle(mutual).as_deref(), Some("a -> b -> a"));
    // Comments and strings do not count; a later line reading a variable is not its value.
    let fine = "let a = Resources.*[ Type == '%a' ] # %a\nlet b = %a\nrule R when %b !empty { %b.Properties { X exists } }\n";
    assert_eq!(variable_cycle(fine), None);
    for rule in PolicyPack::all_builtin().rules {
        assert_eq!(variable_cycle(&rule.text), None, "{}", rule.origin);
    }
    let assembly = reference::kimi_k3_eks().synth().unwrap();
    let report = refusals(&assembly, &one_file("cycle.guard", direct));
    assert!(
        report
            .iter()
            .any(|d| d.message.contains("refer to themselves (lc -> lc)")
                && d.help.contains("never from itself")),
        "{report:?}"
    );
}

/// A rule file with a line longer than Guard's column arithmetic handles quickly is HF1002
/// before Guard parses it (one line of 600 KB took 4 s).
#[test]
fn overlong_rule_lines_are_refused_before_guard_parses() {
    use hyperforge::policy::MAX_RULE_LINE;
    let assembly = reference::kimi_k3_eks().synth().unwrap();
    for (length, refused) in [(MAX_RULE_LINE, false), (MAX_RULE_LINE + 1, true)] {
        let padding = "x".repeat(length - "rule R { Resources.*.Type exists } # ".len());
        let text = format!("rule R {{ Resources.*.Type exists }} # {padding}\n");
        let report = refusals(&assembly, &one_file("long.guard", text));
        let bounded = report.iter().any(|d| d.message.contains("characters long"));
        assert_eq!(bounded, refused, "{length}: {report:?}");
    }
}

/// Guard keeps every clause's report in memory: past 5,000 lines of rules in a pack, the file
/// that passes the bound is HF1002 (a file of 25,000 failing clauses took 386 MiB). The
/// vendored packs hold far fewer.
#[test]
fn a_pack_holds_a_bounded_number_of_rule_lines() {
    use hyperforge::policy::{rule_lines, MAX_RULE_LINES};
    let vendored: usize = PolicyPack::all_builtin()
        .rules
        .iter()
        .map(|r| rule_lines(&r.text))
        .sum();
    assert!(vendored * 4 < MAX_RULE_LINES, "{vendored}");
    let assembly = reference::kimi_k3_eks().synth().unwrap();
    let clause = "    %clusters.Properties.ResourcesVpcConfig.EndpointPublicAccess == false\n";
    let file = |clauses: usize| {
        format!(
            "# a comment\nlet clusters = Resources.*[ Type == 'AWS::EKS::Cluster' ]\nrule MANY when %clusters !empty {{\n{}}}\n",
            clause.repeat(clauses)
        )
    };
    for (clauses, refused) in [(MAX_RULE_LINES - 4, false), (MAX_RULE_LINES - 2, true)] {
        let text = file(clauses);
        assert_eq!(rule_lines(&text), clauses + 3);
        let pack = PolicyPack {
            name: "many".into(),
            rules: vec![
                RuleFile {
                    origin: "many.guard".into(),
                    text,
                },
                // A refused file does not count: the next one still fits.
                RuleFile {
                    origin: "small.guard".into(),
                    text: "rule SMALL { Resources.*.Type exists }\n".into(),
                },
            ],
        };
        let report = assembly.check_policies(&pack).diagnostics;
        let bounded = report
            .iter()
            .any(|d| d.code == Code::PolicyRuleInvalid && d.message.contains("lines of rules"));
        assert_eq!(bounded, refused, "{clauses}: {report}");
        if refused {
            let d = report.with_code(Code::PolicyRuleInvalid).next().unwrap();
            assert_eq!(d.path, "many.guard", "{report}");
            assert!(d.help.contains("split the rules"), "{}", d.help);
            assert!(!report.iter().any(|d| d.path == "small.guard"), "{report}");
        }
    }
}

/// Guard compiles a rule's regular expression again for every value it compares, and a
/// counted repetition of a Unicode class (`\w{1000}`: 300 ms a compile) multiplies that: such
/// a rule file is HF1002 before Guard sees it. The vendored rules' expressions are far below
/// the bound, and slashes in strings and comments are no expressions.
#[test]
fn costly_regular_expressions_are_refused_before_guard_compiles_them() {
    use hyperforge::policy::{
        costly_regex, regex_cost, regex_costs, repetition_cost, rule_regexes, MAX_PACK_REGEX_COST,
        MAX_REGEX_COST,
    };
    assert_eq!(
        rule_regexes(
            "rule R { x == /a\\/b/ << Fix: use 10.0.0.0/8 or a/b >> } # /c/\nlet y = 'd/e/f' \"/g/\" /h{2}/"
        ),
        ["a/b", "h{2}"]
    );
    assert_eq!(regex_cost("abc"), Some(3));
    assert!(regex_cost(r"\w{50}").unwrap() > 30_000);
    assert!(regex_cost(r"^arn:aws[a-z-]*:s3:::[a-z0-9.-]{3,63}$").unwrap() < 2_000);
    // Look-arounds parse only in Guard's engine: they are costed as groups.
    assert!(regex_cost(r"(?=\w{500})x").unwrap() > MAX_REGEX_COST);
    assert!(regex_cost(r"(?<!a)\d{3}(?=b)\1").unwrap() < 1_000);
    // What no syntax reads is bounded by its repetitions.
    assert_eq!(regex_cost(r"\w{5}("), None);
    assert!(repetition_cost(r"\w{5}{20}(") > MAX_REGEX_COST);

    let (mut largest, mut total) = (0, 0);
    for rule in PolicyPack::all_builtin().rules {
        for (_, cost) in regex_costs(&rule.text) {
            largest = largest.max(cost);
            total += cost;
        }
        assert_eq!(
            costly_regex(&regex_costs(&rule.text)),
            None,
            "{}",
            rule.origin
        );
    }
    assert!(
        total < MAX_PACK_REGEX_COST / 10,
        "the vendored rules' total: {total}"
    );
    eprintln!("the vendored rules' expressions: costliest {largest}, {total} together");
    assert!(
        (40_000..MAX_REGEX_COST).contains(&largest),
        "the vendored rules' costliest expression: {largest}"
    );

    let assembly = reference::kimi_k3_eks().synth().unwrap();
    for pattern in [r"\d{1200}", r"[\w\-]{1,451}", r"(?=\w{500})x"] {
        let text = format!("rule R {{ Resources.*.Properties.BucketName == /{pattern}/ }}\n");
        let started = std::time::Instant::now();
        let report = refusals(&assembly, &one_file("regex.guard", text));
        assert!(
            report
                .iter()
                .any(|d| d.message.contains("regular expression")
                    && d.help.contains("counted repetitions")),
            "{pattern}: {report:?}"
        );
        eprintln!("{pattern}: refused in {:?}", started.elapsed());
    }
    // Expressions each within the bound (compared with nothing here: Guard compiles them
    // while parsing), too many together: the files past the pack's budget are refused, the
    // ones before them evaluated.
    let file = |i: usize| {
        RuleFile {
        origin: format!("many-{i}.guard"),
        text: format!(
            "rule R{i} {{ Resources.*[ Type == 'AWS::None' ].Properties.Name == /\\w{{70}}/ or Resources.*[ Type == 'AWS::None' ].Type == /\\w{{70}}/ }}\n"
        ),
    }
    };
    let pack = PolicyPack {
        name: "many".into(),
        rules: (0..40).map(file).collect(),
    };
    let refused = refusals(&assembly, &pack);
    assert!(
        !refused.is_empty()
            && refused.len() < 40
            && refused
                .iter()
                .all(|d| d.message.contains("are compiled at once")),
        "{refused:?}"
    );
}
