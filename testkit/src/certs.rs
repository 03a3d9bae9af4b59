//! Test certificates: `scripts/make-certs.sh` run once into a temporary
//! directory (a CA, broker key stores with SANs 127.0.0.1-3, a client
//! certificate, a foreign CA's client and an expired client; the script's
//! header lists them).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{ensure, Result};

use crate::process::scratch_dir;

/// The certificates of one test, removed with it.
pub struct Certs {
    dir: tempfile::TempDir,
}

impl Certs {
    pub fn make() -> Result<Certs> {
        let dir = scratch_dir("chronik-certs-")?;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/make-certs.sh");
        let out = Command::new("bash").arg(&script).arg(dir.path()).output()?;
        ensure!(
            out.status.success(),
            "make-certs.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(Certs { dir })
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn arg(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
}
