//! An FSx for Lustre file system next to the GPUs, optionally linked to an S3 bucket: model
//! weights staged in S3 appear in the file system (metadata at once, data on first read) and
//! stay in step with the bucket. Secure and cost-aware defaults: `PERSISTENT_2`, the smallest
//! capacity (1200 GiB) at 125 MB/s per TiB, LZ4 compression, Lustre 2.15, encryption at rest
//! (always; a customer managed key on request), warnings and errors logged to CloudWatch Logs.
//! The file system's network interfaces take the given security group, whose Lustre ports
//! (988, 1018-1023) must be open within itself, as the cluster security group's are.

use super::stack_file::Ints;
use super::{Construct, Context};
use crate::app::text::Text;
use crate::app::{kind, AttrRef, Ref};
use crate::diagnostics::{Code, Diagnostics};
use crate::resources::{DataRepositoryAssociation, LustreFileSystem, S3Event, Scope, StackOutput};

pub use crate::resources::{LustreCompression, LustreDeployment};

/// The longest file system path of a data repository association.
const MAX_FILE_SYSTEM_PATH: usize = 4096;

/// The declared range of `storage_capacity_gib`: from the smallest file system up; the builder
/// checks the sizes in between (`LustreDeployment::valid_capacity`).
pub const STORAGE_GIB: Ints = Ints::new(crate::resources::MIN_CAPACITY_GIB as i64, u32::MAX as i64);

/// The declared range of `throughput_per_tib`: the lowest to the highest throughput offered
/// (`LustreDeployment::throughputs`); the builder checks the values in between.
pub const THROUGHPUT_PER_TIB: Ints = {
    const T: &[u32] = crate::resources::LustreDeployment::Persistent2.throughputs();
    Ints::new(T[0] as i64, T[T.len() - 1] as i64)
};
/// The longest S3 prefix (an S3 key is at most 1024 bytes).
const MAX_S3_PREFIX: usize = 1024;

/// The FSx for Lustre builder.
#[derive(Clone, Debug)]
pub struct FsxLustre {
    id: String,
    subnet: Ref<kind::Subnet>,
    security_group: Ref<kind::SecurityGroup>,
    deployment: LustreDeployment,
    storage_gib: u32,
    throughput_per_tib: u32,
    compression: LustreCompression,
    kms_key: Option<Ref<kind::KmsKey>>,
    data_repository: Option<DataRepository>,
}

/// A link between a directory of the file system and a bucket prefix.
#[derive(Clone, Debug)]
pub struct DataRepository {
    /// The bucket.
    pub bucket: Ref<kind::Bucket>,
    /// The key prefix inside the bucket (`models/`; empty for the whole bucket).
    pub prefix: String,
    /// The directory on the file system (`/models`).
    pub file_system_path: String,
}

/// Handle to the file system.
#[derive(Clone, Debug)]
pub struct FsxLustreHandle {
    /// The file system: its id, DNS name and mount name (what a Lustre client or the FSx CSI
    /// driver's static volume needs).
    pub file_system: Ref<kind::FsxFileSystem>,
}

impl FsxLustre {
    /// A `PERSISTENT_2` file system of 1200 GiB at 125 MB/s per TiB in `subnet`, its network
    /// interfaces in `security_group`.
    pub fn new(
        id: impl Into<String>,
        subnet: &Ref<kind::Subnet>,
        security_group: &Ref<kind::SecurityGroup>,
    ) -> Self {
        FsxLustre {
            id: id.into(),
            subnet: subnet.clone(),
            security_group: security_group.clone(),
            deployment: LustreDeployment::Persistent2,
            storage_gib: 1200,
            throughput_per_tib: 125,
            compression: LustreCompression::Lz4,
            kms_key: None,
            data_repository: None,
        }
    }

    /// The deployment type (default `PERSISTENT_2`).
    pub fn deployment(mut self, deployment: LustreDeployment) -> Self {
        self.deployment = deployment;
        self
    }

    /// Storage capacity in GiB: 1200 or a multiple of 2400 (default 1200).
    pub fn storage_gib(mut self, gib: u32) -> Self {
        self.storage_gib = gib;
        self
    }

    /// Throughput per TiB of storage in MB/s: 125, 250, 500 or 1000 (default 125).
    pub fn throughput_per_tib(mut self, mb_per_s: u32) -> Self {
        self.throughput_per_tib = mb_per_s;
        self
    }

    /// Data compression (default LZ4).
    pub fn compression(mut self, compression: LustreCompression) -> Self {
        self.compression = compression;
        self
    }

    /// Encrypts the data with a customer managed key instead of the AWS managed key.
    pub fn kms_key(mut self, key: &Ref<kind::KmsKey>) -> Self {
        self.kms_key = Some(key.clone());
        self
    }

    /// Links `file_system_path` (`/models`) to `prefix` (`models/`) of `bucket`, importing the
    /// existing objects' metadata at creation and new, changed and deleted objects afterwards.
    /// A second call replaces the link.
    pub fn data_repository(
        mut self,
        bucket: &Ref<kind::Bucket>,
        prefix: impl Into<String>,
        file_system_path: impl Into<String>,
    ) -> Self {
        self.data_repository = Some(DataRepository {
            bucket: bucket.clone(),
            prefix: prefix.into(),
            file_system_path: file_system_path.into(),
        });
        self
    }

    /// The link to S3, when set.
    pub fn linked_repository(&self) -> Option<&DataRepository> {
        self.data_repository.as_ref()
    }

    pub(crate) fn references(&self) -> Vec<AttrRef> {
        let mut out = vec![self.subnet.id(), self.security_group.id()];
        out.extend(self.kms_key.as_ref().map(|k| k.arn()));
        out.extend(self.data_repository.as_ref().map(|d| d.bucket.name()));
        out
    }

    fn validate(&self, path: &str, ds: &mut Diagnostics) {
        let deployment = self.deployment.as_str();
        if !self.deployment.valid_capacity(self.storage_gib) {
            let next = match self.storage_gib {
                0..=1200 => 1200,
                gib => gib.div_ceil(2400).saturating_mul(2400),
            };
            ds.report(
                Code::InvalidFsxStorageCapacity,
                path,
                format!(
                    "storage capacity `{}` GiB is not a {deployment} size",
                    self.storage_gib
                ),
                format!("use 1200 GiB or a multiple of 2400 GiB, e.g. {next}"),
            );
        }
        let offered = self.deployment.throughputs();
        if !offered.contains(&self.throughput_per_tib) {
            let list: Vec<String> = offered.iter().map(u32::to_string).collect();
            ds.report(
                Code::InvalidFsxThroughput,
                path,
                format!(
                    "throughput `{}` MB/s per TiB is not offered for {deployment}",
                    self.throughput_per_tib
                ),
                format!("use one of {} MB/s per TiB", list.join(", ")),
            );
        }
        let Some(repo) = &self.data_repository else {
            return;
        };
        if let Some(problem) = file_system_path_problem(&repo.file_system_path) {
            ds.report(
                Code::InvalidFsxFileSystemPath,
                path,
                format!("file system path `{}` {problem}", repo.file_system_path),
                "write a directory of the file system starting with `/`, such as `/models`",
            );
        }
        if let Some(problem) = s3_prefix_problem(&repo.prefix) {
            ds.report(
                Code::InvalidFsxS3Prefix,
                path,
                format!("S3 prefix `{}` {problem}", repo.prefix),
                "write a key prefix such as `models/` (or an empty prefix for the whole bucket)",
            );
        }
    }
}

fn has_control(s: &str) -> bool {
    s.chars()
        .any(|c| c.is_control() || c == '\u{2028}' || c == '\u{2029}')
}

/// Why `path` is not a valid file system path of a data repository association.
fn file_system_path_problem(path: &str) -> Option<&'static str> {
    if !path.starts_with('/') {
        Some("does not start with `/`")
    } else if path.len() > MAX_FILE_SYSTEM_PATH {
        Some("is longer than 4096 characters")
    } else if has_control(path) {
        Some("contains control characters")
    } else if path.contains("//") {
        Some("has an empty segment (`//`)")
    } else {
        None
    }
}

/// Why `prefix` is not a valid S3 prefix of a data repository association.
fn s3_prefix_problem(prefix: &str) -> Option<&'static str> {
    if prefix.is_empty() {
        None
    } else if prefix.contains("://") {
        Some("is a URL; give the key prefix inside the bucket")
    } else if prefix.starts_with('/') {
        Some("starts with `/`; S3 keys do not")
    } else if !prefix.ends_with('/') {
        Some("does not end with `/`")
    } else if prefix.contains("//") {
        Some("has an empty segment (`//`)")
    } else if prefix.len() > MAX_S3_PREFIX {
        Some("is longer than 1024 bytes")
    } else if has_control(prefix) {
        Some("contains control characters")
    } else {
        None
    }
}

impl Construct for FsxLustre {
    type Handle = FsxLustreHandle;
    const KIND: &'static str = "fsx_lustre";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> FsxLustreHandle {
        FsxLustreHandle {
            file_system: Ref::new(stack, format!("{}/FileSystem", self.id)),
        }
    }

    fn references(&self) -> Vec<AttrRef> {
        FsxLustre::references(self)
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        FsxLustre::validate(self, cx.path, ds);
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        let stack_name = scope.stack().name().to_owned();
        let fs = self.handle(&stack_name).file_system;
        scope.add(
            "FileSystem",
            LustreFileSystem {
                subnet: self.subnet.id(),
                security_group: self.security_group.id(),
                deployment: self.deployment,
                storage_gib: self.storage_gib,
                throughput_per_tib: self.throughput_per_tib,
                compression: self.compression,
                version: "2.15".to_owned(),
                kms_key: self.kms_key.as_ref().map(|k| k.arn()),
                log_level: "WARN_ERROR".to_owned(),
                name_tag: format!("{stack_name}-{}", self.id),
            },
        );
        if let Some(repo) = &self.data_repository {
            scope.add(
                "DataRepository",
                DataRepositoryAssociation {
                    file_system: fs.id(),
                    file_system_path: repo.file_system_path.clone(),
                    data_repository_path: Text::lit("s3://")
                        .push_ref(repo.bucket.name())
                        .push_lit(format!("/{}", repo.prefix)),
                    import_existing: true,
                    auto_import: vec![S3Event::New, S3Event::Changed, S3Event::Deleted],
                },
            );
        }
        for (id, value, description) in [
            (
                "FileSystemIdOutput",
                fs.id(),
                "FSx for Lustre file system id",
            ),
            (
                "DnsNameOutput",
                fs.dns_name(),
                "FSx for Lustre DNS name (mount source host)",
            ),
            (
                "MountNameOutput",
                fs.mount_name(),
                "FSx for Lustre mount name (mount <dns>@tcp:/<mount name>)",
            ),
        ] {
            scope.add(
                id,
                StackOutput {
                    description: description.to_owned(),
                    value,
                },
            );
        }
    }
}

// --- Stack-file form -------------------------------------------------------------------------

stack_file_shape! {
    pub mod data_repository_fields = "DataRepository", "A link between a directory of the file system and a bucket prefix, importing new, changed and deleted objects." {
        BUCKET: req "bucket", Ty::Ref(Want::Bucket), "The bucket.";
        PREFIX: req "prefix", Ty::Str, "The key prefix in the bucket (`models/`; empty for the whole bucket).";
        FILE_SYSTEM_PATH: req "file_system_path", Ty::Str, "The directory on the file system (`/models`).";
    }
}

stack_file_shape! {
    pub mod fields = <FsxLustre as Construct>::KIND, "An FSx for Lustre file system (PERSISTENT_2, LZ4, Lustre 2.15, encrypted), optionally linked to a bucket." {
        ID: req "fsx_lustre", Ty::Str, "The construct id.";
        SUBNET: req "subnet", Ty::Ref(Want::Subnet), "The file system's subnet.";
        SECURITY_GROUP: req "security_group", Ty::Ref(Want::SecurityGroup), "The security group of its network interfaces (Lustre ports open within it).";
        DEPLOYMENT_TYPE: opt "deployment_type", Ty::Enum(&["PERSISTENT_2"]), default "PERSISTENT_2", "The deployment type.";
        STORAGE_GIB: opt "storage_gib", Ty::U32(super::STORAGE_GIB), default "1200", "Storage capacity in GiB: 1200 or a multiple of 2400.";
        THROUGHPUT_PER_TIB: opt "throughput_per_tib", Ty::U32(super::THROUGHPUT_PER_TIB), default "125", "MB/s per TiB of storage: 125, 250, 500 or 1000.";
        COMPRESSION: opt "compression", Ty::Enum(&["lz4", "none"]), default "lz4", "Data compression.";
        DATA_REPOSITORY: opt "data_repository", Ty::Obj(&data_repository_fields::SHAPE), "The link to S3.";
    }
}

impl super::stack_file::StackFileConstruct for FsxLustre {
    const SHAPE: &'static super::stack_file::Shape = &fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        use super::stack_file::{object, required};
        let subnet = required(r.subnet(&fields::SUBNET));
        let group = required(r.security_groups(&fields::SECURITY_GROUP)).and_then(|mut g| g.pop());
        // `Some(None)`: the link's bucket reference is invalid.
        let repo = object(r, &fields::DATA_REPOSITORY, |d| {
            use data_repository_fields as f;
            let bucket = required(d.bucket(&f::BUCKET));
            let prefix = d.text(&f::PREFIX);
            let path = d.text(&f::FILE_SYSTEM_PATH);
            bucket.map(|b| (b, prefix, path))
        });
        let mut c = FsxLustre::new(id, &subnet?, &group?);
        if let Some(v) = r.u32(&fields::STORAGE_GIB) {
            c = c.storage_gib(v);
        }
        if let Some(v) = r.u32(&fields::THROUGHPUT_PER_TIB) {
            c = c.throughput_per_tib(v);
        }
        if r.text(&fields::DEPLOYMENT_TYPE).as_deref() == Some("PERSISTENT_2") {
            c = c.deployment(LustreDeployment::Persistent2);
        }
        match r.text(&fields::COMPRESSION).as_deref() {
            Some("none") => c = c.compression(LustreCompression::None),
            Some("lz4") => c = c.compression(LustreCompression::Lz4),
            _ => {}
        }
        match repo {
            None => {}
            Some(None) => return None,
            Some(Some((bucket, prefix, path))) => {
                c = c.data_repository(&bucket, prefix?, path?);
            }
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fsx() -> FsxLustre {
        let subnet: Ref<kind::Subnet> = Ref::new("s", "Network/GpuSubnet");
        let sg: Ref<kind::SecurityGroup> = Ref::new("s", "Sg/Group");
        FsxLustre::new("Weights", &subnet, &sg)
    }

    fn codes(f: &FsxLustre) -> Vec<Code> {
        let mut ds = Diagnostics::new();
        f.validate("s/Weights", &mut ds);
        ds.into_iter().map(|d| d.code).collect()
    }

    #[test]
    fn defaults_are_valid() {
        assert!(codes(&fsx()).is_empty());
    }

    #[test]
    fn storage_is_1200_or_multiples_of_2400() {
        for ok in [1200, 2400, 4800, 72000] {
            assert!(codes(&fsx().storage_gib(ok)).is_empty(), "{ok}");
        }
        for bad in [0, 1000, 1800, 3600, 2401] {
            assert_eq!(
                codes(&fsx().storage_gib(bad)),
                [Code::InvalidFsxStorageCapacity],
                "{bad}"
            );
        }
    }

    #[test]
    fn throughput_is_one_of_the_offered_tiers() {
        for ok in [125, 250, 500, 1000] {
            assert!(codes(&fsx().throughput_per_tib(ok)).is_empty(), "{ok}");
        }
        for bad in [0, 50, 200, 2000] {
            assert_eq!(
                codes(&fsx().throughput_per_tib(bad)),
                [Code::InvalidFsxThroughput],
                "{bad}"
            );
        }
    }

    #[test]
    fn file_system_paths_start_with_a_slash() {
        for ok in ["/", "/models", "/ns1/subdir/"] {
            assert_eq!(file_system_path_problem(ok), None, "{ok}");
        }
        for bad in ["models", "", "/a//b", "/a\nb"] {
            assert!(file_system_path_problem(bad).is_some(), "{bad:?}");
        }
        assert!(file_system_path_problem(&format!("/{}", "a".repeat(4096))).is_some());
    }

    #[test]
    fn s3_prefixes_are_key_prefixes() {
        for ok in ["", "models/", "models/kimi-k3/"] {
            assert_eq!(s3_prefix_problem(ok), None, "{ok}");
        }
        for bad in ["/models/", "models", "s3://b/models/", "a//b/", "a\u{0}/"] {
            assert!(s3_prefix_problem(bad).is_some(), "{bad:?}");
        }
    }
}
