//! HyperPod lifecycle scripts: the bucket that holds them (encrypted, versioned, public access
//! blocked, TLS only) and the scripts themselves, emitted as artifacts and uploaded by an
//! upload stage before the cluster is created.

use super::helm::{Upload, UploadFile};
use super::Construct;
use crate::app::{kind, Ref};
use crate::resources::{Bucket, Scope, StackOutput};

/// The default `on_create.sh`: moves containerd and kubelet data to the EBS volume.
pub const DEFAULT_ON_CREATE: &str = include_str!("assets/on_create.sh");

/// The lifecycle scripts builder.
#[derive(Clone, Debug)]
pub struct LifecycleScripts {
    id: String,
    prefix: String,
    on_create: String,
    files: Vec<UploadFile>,
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
    /// A bucket with the default `on_create.sh` under `lifecycle/`.
    pub fn new(id: impl Into<String>) -> Self {
        LifecycleScripts {
            id: id.into(),
            prefix: "lifecycle/".to_owned(),
            on_create: "on_create.sh".to_owned(),
            files: vec![UploadFile {
                name: "on_create.sh".to_owned(),
                content: DEFAULT_ON_CREATE.to_owned(),
            }],
        }
    }

    /// Replaces the `on_create.sh` script.
    pub fn on_create_script(mut self, content: impl Into<String>) -> Self {
        if let Some(f) = self.files.iter_mut().find(|f| f.name == self.on_create) {
            f.content = content.into();
        }
        self
    }

    /// Adds another file next to the entry point (a script it calls).
    pub fn file(mut self, name: impl Into<String>, content: impl Into<String>) -> Self {
        self.files.push(UploadFile {
            name: name.into(),
            content: content.into(),
        });
        self
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
            files: self.files.clone(),
        }
    }

    fn expand(&self, scope: &mut Scope<'_>) {
        scope.add(
            "Bucket",
            Bucket {
                no_access_log_reason: "Holds only the generated HyperPod lifecycle scripts, which are also in the synthesized assembly; object-level access is recorded by CloudTrail data events where enabled",
            },
        );
        let bucket = self.handle(scope.stack().name()).bucket.name();
        scope.add(
            "BucketNameOutput",
            StackOutput {
                description: "Bucket receiving the HyperPod lifecycle scripts".to_owned(),
                value: bucket,
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
        ON_CREATE_SCRIPT: opt "on_create_script", Ty::Str, "Replaces the `on_create.sh` script.";
        FILES: opt "files", Ty::List(&file_fields::SHAPE), "More files next to the entry point.";
    }
}

impl super::stack_file::StackFileConstruct for LifecycleScripts {
    const SHAPE: &'static super::stack_file::Shape = &fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        let mut c = LifecycleScripts::new(id);
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
