//! HyperPod lifecycle scripts: the bucket that holds them (encrypted, versioned, public access
//! blocked, TLS only) and the scripts themselves, emitted as artifacts and uploaded by an
//! upload stage before the cluster is created.
//!
//! The default `on_create.sh` chooses where a node keeps container images and pod volumes
//! ([`ContainerStorage`]): the inference operator downloads a model's weights into a pod
//! volume, so that storage must hold the weights (checked by `validate::storage`, `HF0510`).

use super::helm::{Upload, UploadFile};
use super::Construct;
use crate::app::{kind, Ref};
use crate::resources::plan::Step;
use crate::resources::{AccessLogs, Bucket, Scope, StackOutput};

/// The default `on_create.sh`, with `@CONTAINER_DISK@` standing for the disk it moves
/// containerd and kubelet data to ([`default_on_create`] fills it in).
pub const DEFAULT_ON_CREATE: &str = include_str!("assets/on_create.sh");

/// The placeholder of [`DEFAULT_ON_CREATE`] replaced by the disk's mount point.
const CONTAINER_DISK_PLACEHOLDER: &str = "@CONTAINER_DISK@";

/// Where HyperPod nodes keep containerd's data (images) and kubelet's directory (pod volumes,
/// among them the one the inference operator downloads the weights into).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ContainerStorage {
    /// The instance's local NVMe (instance store), mounted by HyperPod at `/opt/dlami/nvme`:
    /// tens of TB on GPU instances (30.4 TB on p6-b300), gone when the instance is replaced.
    #[default]
    InstanceStore,
    /// The instance group's EBS volume, mounted by HyperPod at `/opt/sagemaker`, of
    /// `InstanceGroup::ebs_volume_gb`.
    EbsVolume,
}

stack_file_names!(ContainerStorage {
    InstanceStore => "instance_store",
    EbsVolume => "ebs_volume",
});

impl ContainerStorage {
    /// Where HyperPod mounts the disk.
    pub fn mount_point(self) -> &'static str {
        match self {
            ContainerStorage::InstanceStore => "/opt/dlami/nvme",
            ContainerStorage::EbsVolume => "/opt/sagemaker",
        }
    }
}

/// The default `on_create.sh` putting containerd and kubelet data on `storage`.
pub fn default_on_create(storage: ContainerStorage) -> String {
    DEFAULT_ON_CREATE.replace(CONTAINER_DISK_PLACEHOLDER, storage.mount_point())
}

/// The lifecycle scripts builder.
#[derive(Clone, Debug)]
pub struct LifecycleScripts {
    id: String,
    prefix: String,
    on_create: String,
    /// A replacement for the default `on_create.sh`.
    custom_on_create: Option<String>,
    container_storage: ContainerStorage,
    /// Files next to the entry point.
    extra_files: Vec<UploadFile>,
}

/// Handle to the scripts and their bucket.
#[derive(Clone, Debug)]
pub struct LifecycleScriptsHandle {
    /// The bucket holding the scripts.
    pub bucket: Ref<kind::Bucket>,
    /// The key prefix of the scripts in the bucket (`lifecycle/`).
    pub prefix: String,
    /// The entry point run on node creation (`on_create.sh`).
    pub on_create: String,
    /// The script files.
    pub files: Vec<UploadFile>,
    /// Where the default `on_create.sh` puts containerd and kubelet data; `None` when the
    /// script was replaced (hyperforge cannot tell what it does).
    pub container_storage: Option<ContainerStorage>,
}

impl LifecycleScriptsHandle {
    /// The upload that puts the scripts into the bucket (for `Stack::upload_stage`).
    pub fn upload(&self) -> Upload {
        Upload {
            bucket: self.bucket.clone(),
            prefix: self.prefix.clone(),
            files: self.files.clone(),
        }
    }
}

impl LifecycleScripts {
    /// A bucket with the default `on_create.sh` under `lifecycle/`, which puts containerd and
    /// kubelet data on the instance store ([`ContainerStorage::InstanceStore`]).
    pub fn new(id: impl Into<String>) -> Self {
        LifecycleScripts {
            id: id.into(),
            prefix: "lifecycle/".to_owned(),
            on_create: "on_create.sh".to_owned(),
            custom_on_create: None,
            container_storage: ContainerStorage::default(),
            extra_files: Vec::new(),
        }
    }

    /// Where the default `on_create.sh` puts containerd and kubelet data (default: the
    /// instance store). No effect on a replaced script.
    pub fn container_storage(mut self, storage: ContainerStorage) -> Self {
        self.container_storage = storage;
        self
    }

    /// Replaces the `on_create.sh` script. Where it keeps container images and pod volumes is
    /// then the script's business: the storage rule (`HF0510`) cannot check it.
    pub fn on_create_script(mut self, content: impl Into<String>) -> Self {
        self.custom_on_create = Some(content.into());
        self
    }

    /// Adds another file next to the entry point (a script it calls).
    pub fn file(mut self, name: impl Into<String>, content: impl Into<String>) -> Self {
        self.extra_files.push(UploadFile {
            name: name.into(),
            content: content.into(),
        });
        self
    }

    /// Where containerd and kubelet data go; `None` for a replaced script.
    pub fn storage(&self) -> Option<ContainerStorage> {
        self.custom_on_create
            .is_none()
            .then_some(self.container_storage)
    }

    /// The files uploaded: the entry point, then the added ones.
    fn files(&self) -> Vec<UploadFile> {
        let entry = UploadFile {
            name: self.on_create.clone(),
            content: self
                .custom_on_create
                .clone()
                .unwrap_or_else(|| default_on_create(self.container_storage)),
        };
        std::iter::once(entry)
            .chain(self.extra_files.iter().cloned())
            .collect()
    }
}

impl Construct for LifecycleScripts {
    type Handle = LifecycleScriptsHandle;
    const KIND: &'static str = "lifecycle_scripts";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, stack: &str) -> LifecycleScriptsHandle {
        LifecycleScriptsHandle {
            bucket: Ref::new(stack, format!("{}/Bucket", self.id)),
            prefix: self.prefix.clone(),
            on_create: self.on_create.clone(),
            files: self.files(),
            container_storage: self.storage(),
        }
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        scope.add(
            "Bucket",
            Bucket {
                name: None,
                access_logs: AccessLogs::Off("Holds only the generated HyperPod lifecycle scripts, which are also in the synthesized assembly; object-level access is recorded by CloudTrail data events where enabled"),
                // Terraform's upload deletes every version of what it wrote.
                deleted_with_objects: None,
                lifecycle: None,
            },
        );
        let bucket = self.handle(scope.stack().name()).bucket.name();
        scope.add(
            "BucketNameOutput",
            StackOutput {
                description: "Bucket receiving the HyperPod lifecycle scripts".to_owned(),
                value: bucket.clone(),
            },
        );
        scope.step(
            "EmptyBucket",
            Step::EmptyVersionedBucket {
                bucket,
                holds: "the lifecycle scripts".to_owned(),
            },
        );
    }
}

// --- Stack-file form -------------------------------------------------------------------------

stack_file_shape! {
    pub mod file_fields = "File", "A file: its name and contents." {
        NAME: req "name", Ty::Str, "The file name.";
        CONTENT: req "content", Ty::Str, "Its contents.";
    }
}

stack_file_shape! {
    pub mod fields = <LifecycleScripts as Construct>::KIND, "A bucket holding the HyperPod lifecycle scripts (default `on_create.sh`)." {
        ID: req "lifecycle_scripts", Ty::Str, "The construct id.";
        CONTAINER_STORAGE: opt "container_storage", Ty::Enum(ContainerStorage::NAMES), default "instance_store", "Where the default `on_create.sh` puts containerd and kubelet data: `instance_store` (local NVMe at /opt/dlami/nvme) or `ebs_volume` (/opt/sagemaker).";
        ON_CREATE_SCRIPT: opt "on_create_script", Ty::Str, "Replaces the `on_create.sh` script.";
        FILES: opt "files", Ty::List(&file_fields::SHAPE), "More files next to the entry point.";
    }
}

impl super::stack_file::StackFileConstruct for LifecycleScripts {
    const SHAPE: &'static super::stack_file::Shape = &fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        let mut c = LifecycleScripts::new(id);
        if let Some(v) = r
            .text(&fields::CONTAINER_STORAGE)
            .and_then(|n| ContainerStorage::from_name(&n))
        {
            c = c.container_storage(v);
        }
        if let Some(v) = r.text(&fields::ON_CREATE_SCRIPT) {
            c = c.on_create_script(v);
        }
        for (name, content) in super::stack_file::list(r, &fields::FILES, |f| {
            let name = f.text(&file_fields::NAME);
            let content = f.text(&file_fields::CONTENT);
            Some((name?, content?))
        }) {
            c = c.file(name, content);
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_script_names_the_chosen_disk() {
        for storage in [ContainerStorage::InstanceStore, ContainerStorage::EbsVolume] {
            let script = default_on_create(storage);
            assert!(!script.contains(CONTAINER_DISK_PLACEHOLDER));
            assert!(script.contains(&format!("CONTAINER_DISK=\"{}\"", storage.mount_point())));
            // No fstab entries: nothing binds empty directories over the disk's after a reboot.
            assert!(!script.contains("/etc/fstab\"") && !script.contains(">> /etc/fstab"));
        }
        let handle = LifecycleScripts::new("L").handle("s");
        assert_eq!(
            handle.container_storage,
            Some(ContainerStorage::InstanceStore)
        );
        assert!(handle.files[0].content.contains("/opt/dlami/nvme"));
        let custom = LifecycleScripts::new("L")
            .on_create_script("#!/bin/bash\n")
            .file("more.sh", "x")
            .handle("s");
        assert_eq!(custom.container_storage, None);
        assert_eq!(custom.files.len(), 2);
        assert_eq!(custom.files[0].content, "#!/bin/bash\n");
    }
}
