//! The Session Manager tunnel to a private EKS API endpoint through the stack's admin host:
//! the commands that open it (printed for the user), and opening it for `--run-external`
//! (a background `aws ssm start-session` port forward and a kubeconfig of its own, in a
//! private temporary directory removed when the tunnel closes, pointing kubectl and helm at
//! `https://127.0.0.1:<port>`, certificates still checked against the endpoint's name). Neither
//! the assembly nor the user's own kubeconfig is touched.

use super::error::DeployError;
use crate::assembly::manifest::AdminHostManifest;
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the port forward may take to accept connections.
const OPEN_TIMEOUT: Duration = Duration::from_secs(90);

/// The shell commands that open the tunnel and point kubectl at it (as the runbook has them).
pub fn instructions(cluster: &str, region: &str, admin: &AdminHostManifest) -> Vec<String> {
    let port = admin.local_port;
    vec![
        format!("INSTANCE=$(aws ec2 describe-instances --region {region} --filters Name=tag:Name,Values={} Name=instance-state-name,Values=running --query 'Reservations[0].Instances[0].InstanceId' --output text)", admin.name_tag),
        format!("ENDPOINT=$(aws eks describe-cluster --region {region} --name {cluster} --query cluster.endpoint --output text)"),
        format!("aws ssm start-session --region {region} --target \"$INSTANCE\" --document-name AWS-StartPortForwardingSessionToRemoteHost --parameters \"host=${{ENDPOINT#https://}},portNumber=443,localPortNumber={port}\" &"),
        format!("aws eks update-kubeconfig --region {region} --name {cluster}"),
        format!("kubectl config set-cluster \"$(aws eks describe-cluster --region {region} --name {cluster} --query cluster.arn --output text)\" --server https://127.0.0.1:{port} --tls-server-name \"${{ENDPOINT#https://}}\""),
    ]
}

/// An open tunnel; closing it (drop) ends the session and removes its kubeconfig.
pub struct Tunnel {
    session: Option<Child>,
    dir: PathBuf,
    kubeconfig: PathBuf,
}

impl Tunnel {
    /// Finds the admin host, writes a kubeconfig for the tunnel and starts the port forward,
    /// returning once it accepts connections.
    /// `env` is the AWS CLI's environment for the deploy's settings (profile, endpoint).
    pub fn open(
        cluster: &str,
        region: &str,
        admin: &AdminHostManifest,
        env: &[(&'static str, String)],
    ) -> Result<Tunnel, DeployError> {
        // The port must be free: a listener left there (an earlier tunnel) would answer for
        // this one and forward to whatever it was opened for.
        let local = SocketAddrV4::new(Ipv4Addr::LOCALHOST, admin.local_port);
        if let Err(e) = std::net::TcpListener::bind(local) {
            return Err(failed(
                "aws ssm start-session",
                format!(
                    "127.0.0.1:{} is not free ({e}); close the tunnel or program using it first",
                    admin.local_port
                ),
            ));
        }
        let tag = format!("Name=tag:Name,Values={}", admin.name_tag);
        let instance = output(
            env,
            &[
                "ec2",
                "describe-instances",
                "--region",
                region,
                "--filters",
                &tag,
                "Name=instance-state-name,Values=running",
                "--query",
                "Reservations[0].Instances[0].InstanceId",
                "--output",
                "text",
            ],
        )?;
        if !instance.starts_with("i-") {
            return Err(failed(
                "aws ec2 describe-instances",
                format!(
                    "no running admin host tagged `{}` (found `{instance}`)",
                    admin.name_tag
                ),
            ));
        }
        let describe = |query: &str| {
            output(
                env,
                &[
                    "eks",
                    "describe-cluster",
                    "--region",
                    region,
                    "--name",
                    cluster,
                    "--query",
                    query,
                    "--output",
                    "text",
                ],
            )
        };
        let endpoint = describe("cluster.endpoint")?;
        let arn = describe("cluster.arn")?;
        let host = endpoint.trim_start_matches("https://").to_owned();
        let dir = private_dir()?;
        // From here on, dropping the tunnel removes the directory.
        let mut tunnel = Tunnel {
            session: None,
            kubeconfig: dir.join("kubeconfig"),
            dir,
        };
        let kubeconfig = tunnel.kubeconfig.clone();
        let path = kubeconfig.display().to_string();
        let server = format!("https://127.0.0.1:{}", admin.local_port);
        run(
            env,
            "aws",
            &[
                "eks",
                "update-kubeconfig",
                "--region",
                region,
                "--name",
                cluster,
                "--kubeconfig",
                &path,
            ],
        )?;
        run(
            env,
            "kubectl",
            &[
                "config",
                "set-cluster",
                &arn,
                "--kubeconfig",
                &path,
                "--server",
                &server,
                "--tls-server-name",
                &host,
            ],
        )?;
        let parameters = format!(
            "host={host},portNumber=443,localPortNumber={}",
            admin.local_port
        );
        let mut command = Command::new("aws");
        command.envs(env.iter().map(|(k, v)| (k, v)));
        // Its own process group, so closing the tunnel also ends the session-manager-plugin
        // the CLI starts.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let session = command
            .args([
                "ssm",
                "start-session",
                "--region",
                region,
                "--target",
                &instance,
            ])
            .args([
                "--document-name",
                "AWS-StartPortForwardingSessionToRemoteHost",
            ])
            .args(["--parameters", &parameters])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                failed(
                    "aws ssm start-session",
                    format!("could not be started: {e}"),
                )
            })?;
        let session = tunnel.session.insert(session);
        let started = Instant::now();
        loop {
            let open = TcpStream::connect_timeout(&local.into(), Duration::from_secs(1)).is_ok();
            if open && matches!(session.try_wait(), Ok(None)) {
                return Ok(tunnel);
            }
            if let Ok(Some(status)) = session.try_wait() {
                return Err(failed("aws ssm start-session", format!("ended ({status}) before the tunnel opened; is the Session Manager plugin installed?")));
            }
            if started.elapsed() > OPEN_TIMEOUT {
                return Err(failed(
                    "aws ssm start-session",
                    format!(
                        "port {} did not open within {} s",
                        admin.local_port,
                        OPEN_TIMEOUT.as_secs()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The kubeconfig pointing at the tunnel (`KUBECONFIG` for kubectl and helm).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        if let Some(session) = &mut self.session {
            // The whole group: the CLI and the plugin it started.
            #[cfg(unix)]
            let _ = Command::new("kill")
                .args(["-TERM", "--", &format!("-{}", session.id())])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            let _ = session.kill();
            let _ = session.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A new directory only this user can read, under the system's temporary directory.
fn private_dir() -> Result<PathBuf, DeployError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let dir =
        std::env::temp_dir().join(format!("hyperforge-tunnel-{}-{nanos}", std::process::id()));
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(&dir)
        .map_err(|e| failed(&format!("mkdir {}", dir.display()), e.to_string()))?;
    Ok(dir)
}

fn failed(command: &str, problem: String) -> DeployError {
    DeployError::External {
        command: command.to_owned(),
        problem,
    }
}

fn output(env: &[(&'static str, String)], args: &[&str]) -> Result<String, DeployError> {
    let shown = format!("aws {}", args.join(" "));
    let out = Command::new("aws")
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| failed(&shown, format!("could not be started: {e}")))?;
    if !out.status.success() {
        return Err(failed(
            &shown,
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn run(env: &[(&'static str, String)], program: &str, args: &[&str]) -> Result<(), DeployError> {
    let shown = format!("{program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_err(|e| failed(&shown, format!("could not be started: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(failed(&shown, format!("failed ({status})")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_forward_the_endpoint_through_the_named_host() {
        let admin = AdminHostManifest {
            name_tag: "kimi-k3-admin".into(),
            local_port: 8443,
        };
        let lines = instructions("kimi-k3", "us-west-2", &admin).join("\n");
        assert!(lines.contains("Values=kimi-k3-admin"));
        assert!(lines.contains("AWS-StartPortForwardingSessionToRemoteHost"));
        assert!(lines.contains("localPortNumber=8443"));
        assert!(lines.contains("--server https://127.0.0.1:8443"));
    }

    #[test]
    fn the_kubeconfig_directory_is_private_and_goes_with_the_tunnel() {
        let dir = private_dir().expect("temporary directory");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        std::fs::write(dir.join("kubeconfig"), "apiVersion: v1\n").unwrap();
        let tunnel = Tunnel {
            session: None,
            kubeconfig: dir.join("kubeconfig"),
            dir: dir.clone(),
        };
        assert!(tunnel.kubeconfig().starts_with(&dir));
        drop(tunnel);
        assert!(!dir.exists());
    }

    #[test]
    fn a_busy_local_port_is_refused_before_anything_runs() {
        let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let admin = AdminHostManifest {
            name_tag: "x-admin".into(),
            local_port: busy.local_addr().unwrap().port(),
        };
        let Err(e) = Tunnel::open("x", "us-west-2", &admin, &[]) else {
            panic!("opened a tunnel on a busy port");
        };
        assert!(e.to_string().contains("is not free"), "{e}");
    }
}
