//! Format-neutral strings that may contain references: ARNs built from a resource's id, JSON
//! documents that embed a role ARN, ... Each backend renders a [`Text`] in its own syntax
//! (`Fn::Sub` in CloudFormation, `${...}` interpolation in Terraform).

use crate::app::AttrRef;

/// AWS pseudo values known only at deploy time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pseudo {
    /// The partition (`aws`, `aws-us-gov`, `aws-cn`).
    Partition,
    /// The region being deployed to.
    Region,
    /// The account being deployed to.
    AccountId,
    /// The DNS suffix of the partition (`amazonaws.com`).
    UrlSuffix,
}

/// One piece of a [`Text`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// Literal characters.
    Lit(String),
    /// A resource attribute.
    Ref(AttrRef),
    /// A pseudo value.
    Pseudo(Pseudo),
    /// An EKS OIDC issuer URL without its `https://` scheme (the form IAM condition keys use).
    IssuerHostPath(AttrRef),
    /// A value chosen when the stack is deployed.
    Input(StackInput),
}

/// A value known only when the stack is deployed (a reservation id, its zone id, a secret's
/// ARN), declared with its description, pattern and default: a template parameter in every
/// CloudFormation stage that uses it, a Terraform variable, a placeholder listed in the
/// manifest for Kubernetes objects. Two uses of one name declare the same input.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StackInput {
    /// The input's name, PascalCase (`NetworkGpuSubnetAzId`); Terraform uses its snake_case.
    pub name: String,
    /// What the value is and where to find it.
    pub description: String,
    /// The value used when none is given.
    pub default: Option<String>,
    /// The pattern a value must match (RE2 and CloudFormation `AllowedPattern` alike).
    pub pattern: Option<String>,
    /// What a valid value is, completing "must be" (`an Availability Zone id such as
    /// usw2-az2`).
    pub expected: String,
}

/// A string made of literal pieces, references and pseudo values.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Text(pub Vec<Part>);

impl Text {
    /// A literal.
    pub fn lit(s: impl Into<String>) -> Text {
        Text(vec![Part::Lit(s.into())])
    }

    /// A reference to one attribute.
    pub fn attr(r: AttrRef) -> Text {
        Text(vec![Part::Ref(r)])
    }

    /// Appends a literal.
    pub fn push_lit(mut self, s: impl Into<String>) -> Text {
        let s = s.into();
        if let Some(Part::Lit(last)) = self.0.last_mut() {
            last.push_str(&s);
        } else {
            self.0.push(Part::Lit(s));
        }
        self
    }

    /// Appends a reference.
    pub fn push_ref(mut self, r: AttrRef) -> Text {
        self.0.push(Part::Ref(r));
        self
    }

    /// Appends a pseudo value.
    pub fn push_pseudo(mut self, p: Pseudo) -> Text {
        self.0.push(Part::Pseudo(p));
        self
    }

    /// A deploy-time input alone.
    pub fn input(input: StackInput) -> Text {
        Text(vec![Part::Input(input)])
    }

    /// Appends a deploy-time input.
    pub fn push_input(mut self, input: StackInput) -> Text {
        self.0.push(Part::Input(input));
        self
    }

    /// The text as a JSON string literal: quoted, its literal pieces escaped. References,
    /// pseudo values and inputs stand unescaped inside the quotes (ids, ARNs and values their
    /// patterns restrict need no escaping).
    pub fn json_quoted(&self) -> Text {
        let mut out = Text::lit("\"");
        for part in &self.0 {
            out = match part {
                Part::Lit(s) => {
                    let quoted = serde_json::Value::String(s.clone()).to_string();
                    out.push_lit(&quoted[1..quoted.len() - 1])
                }
                other => {
                    out.0.push(other.clone());
                    out
                }
            };
        }
        out.push_lit("\"")
    }

    /// The deploy-time inputs the text contains.
    pub fn inputs(&self) -> impl Iterator<Item = &StackInput> {
        self.0.iter().filter_map(|p| match p {
            Part::Input(i) => Some(i),
            _ => None,
        })
    }

    /// Appends the issuer host and path of an EKS cluster's OIDC issuer URL.
    pub fn push_issuer(mut self, issuer_url: AttrRef) -> Text {
        self.0.push(Part::IssuerHostPath(issuer_url));
        self
    }

    /// Appends another text.
    pub fn push_text(mut self, other: Text) -> Text {
        for part in other.0 {
            self = match part {
                Part::Lit(s) => self.push_lit(s),
                other => {
                    self.0.push(other);
                    self
                }
            };
        }
        self
    }

    /// `arn:<partition>:<service>:<region>:<account>:<resource>`, with region and account of the
    /// deployment (either may be left out with `with_region`/`with_account` false).
    pub fn arn(service: &str, with_region: bool, with_account: bool, resource: Text) -> Text {
        let mut t = Text::lit("arn:")
            .push_pseudo(Pseudo::Partition)
            .push_lit(format!(":{service}:"));
        if with_region {
            t = t.push_pseudo(Pseudo::Region);
        }
        t = t.push_lit(":");
        if with_account {
            t = t.push_pseudo(Pseudo::AccountId);
        }
        t.push_lit(":").push_text(resource)
    }

    /// The literal value, if the text has no references or pseudo values.
    pub fn as_literal(&self) -> Option<String> {
        let mut out = String::new();
        for part in &self.0 {
            match part {
                Part::Lit(s) => out.push_str(s),
                _ => return None,
            }
        }
        Some(out)
    }

    /// The text as one deployment in `region` with account `account` would resolve it: other
    /// deploy-time values in angle brackets (`<partition>`, `<url-suffix>`, an output's or an
    /// input's name). What a name's length and characters are checked on, and how people read
    /// a name the deployment chooses.
    pub fn resolved(&self, region: &str, account: &str) -> String {
        let mut out = String::new();
        for part in &self.0 {
            match part {
                Part::Lit(s) => out.push_str(s),
                Part::Pseudo(Pseudo::Region) => out.push_str(region),
                Part::Pseudo(Pseudo::AccountId) => out.push_str(account),
                Part::Pseudo(Pseudo::Partition) => out.push_str("<partition>"),
                Part::Pseudo(Pseudo::UrlSuffix) => out.push_str("<url-suffix>"),
                Part::Ref(r) | Part::IssuerHostPath(r) => {
                    out.push_str(&format!("<{}>", r.output_key()))
                }
                Part::Input(i) => out.push_str(&format!("<{}>", i.name)),
            }
        }
        out
    }

    /// The literal parts, in order.
    pub fn literal_parts(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter_map(|p| match p {
            Part::Lit(s) => Some(s.as_str()),
            _ => None,
        })
    }

    /// The references the text contains.
    pub fn references(&self) -> impl Iterator<Item = &AttrRef> {
        self.0.iter().filter_map(|p| match p {
            Part::Ref(r) | Part::IssuerHostPath(r) => Some(r),
            _ => None,
        })
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        Text::lit(s)
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text::lit(s)
    }
}

impl From<AttrRef> for Text {
    fn from(r: AttrRef) -> Text {
        Text::attr(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_merge_and_arns_compose() {
        let t = Text::lit("a").push_lit("b");
        assert_eq!(t.as_literal().as_deref(), Some("ab"));
        let arn = Text::arn("iam", false, true, Text::lit("role/x"));
        assert_eq!(arn.0.len(), 5);
        assert_eq!(arn.as_literal(), None);
    }
}
