//! FSx for Lustre: a file system in one subnet and the data repository associations that link
//! its directories to S3. The API's own spellings of deployment types, compression and import
//! events are written here once; both backends use them.

use super::ResourceFacts;
use crate::app::text::Text;
use crate::app::AttrRef;
use crate::app::Kind;

/// How an FSx for Lustre file system is deployed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LustreDeployment {
    /// Persistent SSD storage, second generation: replicated within its zone, throughput per
    /// TiB of 125 to 1000 MB/s, data repository associations supported.
    #[default]
    Persistent2,
}

impl LustreDeployment {
    /// The API's name (`PERSISTENT_2`).
    pub fn as_str(self) -> &'static str {
        match self {
            LustreDeployment::Persistent2 => "PERSISTENT_2",
        }
    }

    /// The storage type (`SSD`).
    pub fn storage_type(self) -> &'static str {
        match self {
            LustreDeployment::Persistent2 => "SSD",
        }
    }

    /// The per-unit storage throughputs the deployment type offers, in MB/s per TiB.
    pub const fn throughputs(self) -> &'static [u32] {
        match self {
            LustreDeployment::Persistent2 => &[125, 250, 500, 1000],
        }
    }

    /// Whether `gib` is a storage capacity the deployment type accepts: 1200 GiB or a
    /// multiple of 2400 GiB for persistent SSD storage.
    pub fn valid_capacity(self, gib: u32) -> bool {
        match self {
            LustreDeployment::Persistent2 => {
                gib == MIN_CAPACITY_GIB || (gib > 0 && gib.is_multiple_of(2400))
            }
        }
    }
}

/// The smallest storage capacity of a file system, GiB.
pub const MIN_CAPACITY_GIB: u32 = 1200;

/// How file data is compressed on the file system's disks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LustreCompression {
    /// LZ4: cheap on CPU, usually a saving in space and throughput.
    #[default]
    Lz4,
    /// No compression.
    None,
}

impl LustreCompression {
    /// The API's name (`LZ4`, `NONE`).
    pub fn as_str(self) -> &'static str {
        match self {
            LustreCompression::Lz4 => "LZ4",
            LustreCompression::None => "NONE",
        }
    }
}

/// An FSx for Lustre file system on SSD storage, encrypted at rest (always: with the AWS
/// managed key, or with `kms_key`).
#[derive(Clone, Debug, PartialEq)]
pub struct LustreFileSystem {
    /// Its subnet (persistent file systems live in one zone).
    pub subnet: AttrRef,
    /// The security group of its network interfaces.
    pub security_group: AttrRef,
    /// The deployment type.
    pub deployment: LustreDeployment,
    /// Storage capacity in GiB.
    pub storage_gib: u32,
    /// Throughput per TiB of storage, in MB/s.
    pub throughput_per_tib: u32,
    /// Data compression.
    pub compression: LustreCompression,
    /// The Lustre version (`2.15`).
    pub version: String,
    /// A customer managed key encrypting the data (its ARN); the AWS managed key when `None`.
    pub kms_key: Option<AttrRef>,
    /// The level of events logged to CloudWatch Logs (`WARN_ERROR`).
    pub log_level: String,
    /// The `Name` tag.
    pub name_tag: String,
}

/// An S3 event a data repository association can import automatically.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum S3Event {
    /// A new object.
    New,
    /// A changed object.
    Changed,
    /// A deleted object.
    Deleted,
}

impl S3Event {
    /// The API's name (`NEW`, `CHANGED`, `DELETED`).
    pub fn as_str(self) -> &'static str {
        match self {
            S3Event::New => "NEW",
            S3Event::Changed => "CHANGED",
            S3Event::Deleted => "DELETED",
        }
    }
}

/// A link between a directory of a Lustre file system and an S3 bucket or prefix.
#[derive(Clone, Debug, PartialEq)]
pub struct DataRepositoryAssociation {
    /// The file system's id.
    pub file_system: AttrRef,
    /// The directory on the file system (`/weights`).
    pub file_system_path: String,
    /// The S3 location (`s3://<bucket>/<prefix>`).
    pub data_repository_path: Text,
    /// Import the metadata of the objects already there when the association is created.
    pub import_existing: bool,
    /// Events imported automatically from S3 afterwards.
    pub auto_import: Vec<S3Event>,
}

impl ResourceFacts for LustreFileSystem {
    const HANDLE: Option<Kind> = Some(Kind::FsxFileSystem);

    fn references(&self) -> Vec<AttrRef> {
        let mut out = vec![self.subnet.clone(), self.security_group.clone()];
        out.extend(self.kms_key.clone());
        out
    }
}

impl ResourceFacts for DataRepositoryAssociation {
    fn references(&self) -> Vec<AttrRef> {
        let mut out = vec![self.file_system.clone()];
        out.extend(self.data_repository_path.references().cloned());
        out
    }
}
