//! A `#cloud-config` document, typed: the two modules a machine's bootstrap needs,
//! `write_files` and `runcmd`, with cloud-init's own key names. The rendered text is a
//! [`Secret`] (the files it writes hold keys and tokens), and so is each file's content:
//! `Debug` of a config shows paths and commands, never what a file holds.

use serde::{Serialize, Serializer};
use zeroize::Zeroize as _;

use crate::pki::Secret;

/// The first line of every cloud-config user data: cloud-init reads the rest as YAML
/// only after it.
pub const HEADER: &str = "#cloud-config";

/// The owner bootstrap files are written with.
pub const ROOT_OWNER: &str = "root:root";

#[derive(Debug, thiserror::Error)]
pub enum CloudInitError {
    #[error("file mode {mode:#o} is not a permission mode (at most 0o7777)")]
    Mode { mode: u16 },
    #[error("cannot write the cloud-config as YAML: {message}")]
    Yaml { message: String },
}

/// A cloud-config document.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CloudConfig {
    /// Written in this order, before `runcmd` runs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub write_files: Vec<WriteFile>,
    /// Run in this order, once, at first boot.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runcmd: Vec<Command>,
}

/// One entry of `write_files`.
#[derive(Clone, Debug, Serialize)]
pub struct WriteFile {
    pub path: String,
    pub content: Secret,
    pub permissions: Permissions,
    /// `user:group`.
    pub owner: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoding: Option<Encoding>,
}

/// A file's mode, written as cloud-init reads it: four octal digits in a string
/// (`"0600"`), never a YAML number (which a reader may take for decimal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permissions(u16);

impl Permissions {
    /// `0600`: keys, and whatever holds a token.
    pub const PRIVATE: Permissions = Permissions(0o600);
    /// `0644`: certificates and public keys.
    pub const PUBLIC: Permissions = Permissions(0o644);

    pub fn new(mode: u16) -> Result<Permissions, CloudInitError> {
        if mode > 0o7777 {
            return Err(CloudInitError::Mode { mode });
        }
        Ok(Permissions(mode))
    }

    pub fn mode(self) -> u16 {
        self.0
    }
}

impl Serialize for Permissions {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&format_args!("{:04o}", self.0))
    }
}

/// How `content` is encoded (cloud-init decodes it before writing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Encoding {
    #[serde(rename = "b64")]
    Base64,
    #[serde(rename = "gz+b64")]
    GzipBase64,
}

/// One entry of `runcmd`: a line for `sh`, or a program and its arguments run without
/// a shell.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Command {
    Shell(String),
    Argv(Vec<String>),
}

impl CloudConfig {
    /// The user data: [`HEADER`], then the document as YAML.
    pub fn render(&self) -> Result<Secret, CloudInitError> {
        let mut buffer = format!("{HEADER}\n").into_bytes();
        if let Err(e) = yaml_serde::to_writer(&mut buffer, self) {
            buffer.zeroize();
            return Err(CloudInitError::Yaml {
                message: e.to_string(),
            });
        }
        match String::from_utf8(buffer) {
            Ok(text) => Ok(Secret::new(text)),
            Err(e) => {
                e.into_bytes().zeroize();
                Err(CloudInitError::Yaml {
                    message: "the YAML written is not UTF-8".to_string(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> CloudConfig {
        CloudConfig {
            write_files: vec![
                WriteFile {
                    path: "/etc/kubernetes/pki/ca.key".into(),
                    content: Secret::new("-----BEGIN PRIVATE KEY-----\nAAAA\n".into()),
                    permissions: Permissions::PRIVATE,
                    owner: ROOT_OWNER.into(),
                    encoding: None,
                },
                WriteFile {
                    path: "/etc/motd".into(),
                    content: Secret::new("aGVsbG8K".into()),
                    permissions: Permissions::new(0o755).expect("mode"),
                    owner: "ubuntu:ubuntu".into(),
                    encoding: Some(Encoding::Base64),
                },
            ],
            runcmd: vec![
                Command::Shell("kubeadm init --config /run/kubeadm/kubeadm.yaml".into()),
                Command::Argv(vec!["systemctl".into(), "restart".into(), "kubelet".into()]),
            ],
        }
    }

    #[test]
    fn the_text_begins_with_the_cloud_config_line_and_the_rest_is_its_yaml() {
        let text = sample().render().expect("render");
        let (first, rest) = text.expose().split_once('\n').expect("lines");
        assert_eq!(first, "#cloud-config");
        let doc: yaml_serde::Value = yaml_serde::from_str(rest).expect("yaml");
        let files = doc["write_files"].as_sequence().expect("write_files");
        assert_eq!(files.len(), 2);
        assert_eq!(files[0]["path"], "/etc/kubernetes/pki/ca.key");
        assert_eq!(files[0]["content"], "-----BEGIN PRIVATE KEY-----\nAAAA\n");
        assert_eq!(files[0]["owner"], "root:root");
        assert!(files[0].get("encoding").is_none());
        assert_eq!(files[1]["encoding"], "b64");
        let commands = doc["runcmd"].as_sequence().expect("runcmd");
        assert_eq!(
            commands[0],
            "kubeadm init --config /run/kubeadm/kubeadm.yaml"
        );
        assert_eq!(commands[1][2], "kubelet");
    }

    #[test]
    fn permissions_are_four_octal_digits_in_a_string() {
        let text = sample().render().expect("render");
        let doc: yaml_serde::Value = yaml_serde::from_str(text.expose()).expect("yaml");
        assert_eq!(doc["write_files"][0]["permissions"], "0600");
        assert_eq!(doc["write_files"][1]["permissions"], "0755");
        assert_eq!(Permissions::PUBLIC.mode(), 0o644);
        assert!(Permissions::new(0o10000).is_err());
    }

    #[test]
    fn an_empty_config_is_the_header_and_an_empty_mapping() {
        let text = CloudConfig::default().render().expect("render");
        let (first, rest) = text.expose().split_once('\n').expect("lines");
        assert_eq!(first, HEADER);
        let doc: yaml_serde::Value = yaml_serde::from_str(rest).expect("yaml");
        assert_eq!(doc.as_mapping().map(|m| m.len()), Some(0));
    }

    #[test]
    fn debug_of_a_config_shows_no_file_content() {
        let printed = format!("{:?}", sample());
        assert!(!printed.contains("PRIVATE KEY"), "{printed}");
        assert!(printed.contains("/etc/kubernetes/pki/ca.key"), "{printed}");
        assert_eq!(
            format!("{:?}", sample().render().expect("render")),
            "Secret(<redacted>)"
        );
    }
}
