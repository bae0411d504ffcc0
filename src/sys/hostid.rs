//! This machine's host identity, stored with every environment and
//! campaign so that the runs of many machines can share one database
//! (`schedlab merge`) and still be told apart: a stable id per machine and
//! its hostname (which may change, or repeat across machines).
//!
//! The id is derived from `/etc/machine-id` (systemd's per-installation id)
//! by a keyed hash, as `sd_id128_get_machine_app_specific` does, so the
//! machine id itself never leaves the machine. Without a usable
//! machine-id (some containers), a random UUID is created once and kept in
//! the state directory (`/var/lib/schedlab/host-id`, else
//! `$XDG_STATE_HOME/schedlab/host-id` or `~/.local/state/schedlab/host-id`).
//! `SCHEDLAB_HOST_ID` overrides both (tests, and machines cloned from one
//! image that share a machine-id). `SCHEDLAB_HOSTNAME` overrides the
//! hostname recorded (`uname -n`): a name of the inventory, or several
//! hosts that are one machine (an Ansible test on loopback addresses).

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The environment variable that overrides the host id.
pub const HOST_ID_ENV: &str = "SCHEDLAB_HOST_ID";
/// The environment variable that overrides the hostname recorded.
pub const HOSTNAME_ENV: &str = "SCHEDLAB_HOSTNAME";
const MACHINE_ID: &str = "/etc/machine-id";
const STATE_DIR: &str = "/var/lib/schedlab";
const FILE_NAME: &str = "host-id";

/// The host id of this machine, or None when no id can be read or kept
/// (nothing writable for the fallback). Never fails.
pub fn host_id() -> Option<String> {
    if let Some(v) = std::env::var_os(HOST_ID_ENV) {
        let v = v.to_string_lossy().trim().to_string();
        if !v.is_empty() {
            return Some(v);
        }
    }
    if let Some(id) = std::fs::read_to_string(MACHINE_ID)
        .ok()
        .and_then(|t| from_machine_id(&t))
    {
        return Some(id);
    }
    state_files().iter().find_map(|p| kept_or_created(p))
}

/// The hostname to record: `SCHEDLAB_HOSTNAME` when set and not blank
/// (trimmed), else `uname`'s (`nodename`).
pub fn hostname_or(nodename: &str) -> String {
    std::env::var_os(HOSTNAME_ENV)
        .map(|v| v.to_string_lossy().trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| nodename.to_string())
}

/// The host id derived from the text of `/etc/machine-id`: a UUID (version
/// 8) made of the first 16 bytes of SHA-256 over a schedlab-specific key
/// and the id. None unless the text is 32 hex digits ("uninitialized" and
/// empty files are not ids).
pub fn from_machine_id(text: &str) -> Option<String> {
    let id = text.trim();
    if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) || id.bytes().all(|b| b == b'0')
    {
        return None;
    }
    let digest = Sha256::digest(format!("schedlab host id\n{}", id.to_ascii_lowercase()));
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    Some(uuid::Uuid::new_v8(bytes).to_string())
}

/// Where a kept host id may live, in order of preference.
fn state_files() -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from(STATE_DIR)];
    match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(x) => dirs.push(PathBuf::from(x).join("schedlab")),
        None => {
            if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
                dirs.push(PathBuf::from(home).join(".local/state/schedlab"));
            }
        }
    }
    dirs.into_iter().map(|d| d.join(FILE_NAME)).collect()
}

/// The id kept in `path`, creating it (a random UUID) when there is none.
/// Creation is atomic: a temporary file renamed without replacing, so two
/// schedlabs starting at once agree on one id.
fn kept_or_created(path: &Path) -> Option<String> {
    if let Some(id) = read_kept(path) {
        return Some(id);
    }
    let dir = path.parent()?;
    std::fs::create_dir_all(dir).ok()?;
    let tmp = tempfile::NamedTempFile::new_in(dir).ok()?;
    std::fs::write(tmp.path(), format!("{}\n", uuid::Uuid::new_v4())).ok()?;
    // persist_noclobber: whoever linked first wins; the loser reads it.
    let _ = tmp.persist_noclobber(path);
    read_kept(path)
}

fn read_kept(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    uuid::Uuid::parse_str(text.trim())
        .ok()
        .map(|u| u.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_ids_hash_to_stable_uuids() {
        let a = from_machine_id("3d1219c7c4c5404aaa1f6d2a48adfda4\n").unwrap();
        assert_eq!(
            a,
            from_machine_id("3D1219C7C4C5404AAA1F6D2A48ADFDA4").unwrap()
        );
        let u = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(u.get_version_num(), 8);
        assert!(!a.contains("3d1219c7"), "the machine id is not exposed");
        assert_ne!(
            a,
            from_machine_id("3d1219c7c4c5404aaa1f6d2a48adfda5").unwrap()
        );
        for bad in [
            "",
            "uninitialized\n",
            "00000000000000000000000000000000",
            "3d12",
        ] {
            assert_eq!(from_machine_id(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_kept_id_is_created_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/host-id");
        let first = kept_or_created(&path).unwrap();
        assert_eq!(kept_or_created(&path).unwrap(), first);
        assert_eq!(uuid::Uuid::parse_str(&first).unwrap().get_version_num(), 4);
        std::fs::write(&path, "garbage").unwrap();
        assert_eq!(read_kept(&path), None);
    }
}
