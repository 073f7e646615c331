//! CloudFormation L1 resource types (generated).
