//! The container image, built with podman from `deploy/container/Containerfile` on a machine
//! without registry access (`--build-arg BINARIES=prebuilt`: binaries built here, FROM scratch),
//! then checked from the outside: its configuration (non-root user, entrypoints, health check,
//! ports) and its file system, exported and run (`--version`, `book new`, a ~2-second `local`
//! build, `serve` answering the image's own health check).
//!
//! Which binaries: by default the ones `cargo test --workspace` built already (dynamically
//! linked, stripped when staged), so that CI does not compile the workspace a second time for
//! another target and feature set (`deploy/container/prebuilt.sh`'s static build was about 200
//! CPU seconds of CI's); the shared libraries `ldd` names for them are then added to the exported
//! file system, beside the device nodes. That leaves the static build to
//! `BOOKFARM_IMAGE_STATIC=1`, which stages `prebuilt.sh`'s static binaries (what users ship) and
//! runs them with nothing added: CI does not build them, nor show that they need no library.
//!
//! Containers cannot run in this sandbox, so the exported file system is entered with `chroot`
//! as the image's user when the test runs as root (only the device nodes a container runtime
//! provides are added), and its binaries are run in place otherwise. Without podman the test
//! prints why it is skipped; `BOOKFARM_REQUIRE_DEPLOY_TOOLS=1` (set by CI) makes that a failure.

use bookfarm_tests::deploy::{binary, containerfile, root, tool_available};
use bookfarm_tests::{Proc, check_book, free_port};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn must(what: &str, o: std::io::Result<Output>) -> String {
    let o = o.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        o.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// podman with its own storage under `dir` (vfs: works without overlay support or a daemon).
fn podman(dir: &Path) -> Command {
    let mut c = Command::new("podman");
    c.arg("--root")
        .arg(dir.join("root"))
        .arg("--runroot")
        .arg(dir.join("run"))
        .args(["--storage-driver", "vfs"]);
    c
}

/// Runs the binaries of an exported image file system.
struct Rootfs {
    dir: PathBuf,
    /// Entered with chroot as the image's user (root only).
    chroot: bool,
    user: String,
}

impl Rootfs {
    /// A path inside the image, as the program sees it.
    fn path(&self, p: &str) -> String {
        if self.chroot {
            p.to_string()
        } else {
            self.dir
                .join(p.trim_start_matches('/'))
                .display()
                .to_string()
        }
    }

    fn command(&self, bin: &str) -> Command {
        let mut c = if self.chroot {
            let mut c = Command::new("chroot");
            c.arg(format!("--userspec={}", self.user))
                .arg(&self.dir)
                .arg(bin);
            c
        } else {
            Command::new(self.dir.join(bin.trim_start_matches('/')))
        };
        // Nothing of the host's environment but where to find `chroot`.
        c.env_clear().env("RUST_LOG", "warn");
        if let Some(path) = std::env::var_os("PATH") {
            c.env("PATH", path);
        }
        c
    }
}

/// Stage the image's binaries as the `prebuilt` context in `ctx` (the layout
/// `deploy/container/prebuilt.sh` makes); returns the shared libraries they need (none for the
/// static build).
fn stage(ctx: &Path) -> BTreeSet<PathBuf> {
    if std::env::var_os("BOOKFARM_IMAGE_STATIC").is_some() {
        must(
            "deploy/container/prebuilt.sh",
            Command::new(root().join("deploy/container/prebuilt.sh"))
                .arg("dev")
                .arg(ctx)
                .output(),
        );
        return BTreeSet::new();
    }
    let bin = ctx.join("rootfs/usr/local/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(ctx.join("rootfs/var/lib/bookfarm")).unwrap();
    let mut libraries = BTreeSet::new();
    for name in ["bookfarm-coordinator", "bookfarm-worker"] {
        let staged = bin.join(name);
        must(
            "strip",
            Command::new("strip")
                .arg("-o")
                .arg(&staged)
                .arg(binary(name))
                .output(),
        );
        // `name => /path (address)`, and the loader as `/path (address)`.
        let ldd = must("ldd", Command::new("ldd").arg(&staged).output());
        libraries.extend(
            ldd.lines()
                .filter_map(|l| l.split_whitespace().find(|w| w.starts_with('/')))
                .map(PathBuf::from),
        );
    }
    libraries
}

#[test]
fn the_image_builds_and_its_binaries_run_from_its_file_system() {
    if !tool_available("podman") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ctx = tmp.path().join("context");
    let libraries = stage(&ctx);
    let containerfile_path = root().join("deploy/container/Containerfile");
    let stages = containerfile();
    for target in ["coordinator", "worker"] {
        must(
            "podman build",
            podman(tmp.path())
                .args([
                    "build",
                    "--format",
                    "docker",
                    "--build-arg",
                    "BINARIES=prebuilt",
                ])
                .arg("-f")
                .arg(&containerfile_path)
                .args([
                    "--target",
                    target,
                    "-t",
                    &format!("localhost/bookfarm-{target}:test"),
                ])
                .arg(&ctx)
                .output(),
        );
        let inspect: serde_json::Value = serde_json::from_str(&must(
            "podman image inspect",
            podman(tmp.path())
                .args(["image", "inspect"])
                .arg(format!("localhost/bookfarm-{target}:test"))
                .output(),
        ))
        .unwrap();
        let config = &inspect[0]["Config"];
        let s = &stages[target];
        let strs = |v: &serde_json::Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        assert_eq!(config["User"], "65532:65532", "{target}: non-root");
        assert_eq!(strs(&config["Entrypoint"]), s.entrypoint, "{target}");
        assert_eq!(strs(&config["Cmd"]), s.cmd, "{target}");
        let health = strs(&inspect[0]["Healthcheck"]["Test"]);
        if target == "coordinator" {
            assert_eq!(health[0], "CMD");
            assert_eq!(
                health[1..],
                s.healthcheck,
                "the health check survives (docker format)"
            );
            let ports: BTreeSet<String> = config["ExposedPorts"]
                .as_object()
                .expect("exposed ports")
                .keys()
                .cloned()
                .collect();
            assert_eq!(
                ports,
                BTreeSet::from(["7700/tcp".into(), "7701/tcp".into()])
            );
        } else {
            assert!(health.is_empty(), "a worker has no HTTP to check");
        }
    }

    // The coordinator image's file system (the worker image has the same files).
    let id = must(
        "podman create",
        podman(tmp.path())
            .args(["create", "localhost/bookfarm-coordinator:test"])
            .output(),
    );
    let tar = tmp.path().join("fs.tar");
    must(
        "podman export",
        podman(tmp.path())
            .args(["export", "-o"])
            .arg(&tar)
            .arg(id.trim())
            .output(),
    );
    let listing = must(
        "tar -tvf",
        Command::new("tar").arg("-tvf").arg(&tar).output(),
    );
    let files: BTreeSet<&str> = listing
        .lines()
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    assert_eq!(
        files,
        BTreeSet::from([
            "usr/local/bin/bookfarm-coordinator",
            "usr/local/bin/bookfarm-worker"
        ]),
        "a scratch image: the two binaries and nothing else\n{listing}"
    );
    assert!(
        listing.lines().any(|l| l.starts_with('d')
            && l.contains("65532/65532")
            && l.ends_with("var/lib/bookfarm/")),
        "the store directory belongs to the image's user\n{listing}"
    );
    let fs = tmp.path().join("fs");
    std::fs::create_dir(&fs).unwrap();
    must(
        "tar -xf",
        Command::new("tar")
            .arg("-xpf")
            .arg(&tar)
            .arg("-C")
            .arg(&fs)
            .output(),
    );
    let is_root = must("id -u", Command::new("id").arg("-u").output()).trim() == "0";
    let rootfs = Rootfs {
        dir: fs.clone(),
        chroot: is_root,
        user: "65532:65532".into(),
    };
    if is_root {
        // What a container runtime provides: /dev nodes (the binaries read their random
        // seed from /dev/urandom) and a writable volume on the store directory.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(fs.join("dev")).unwrap();
        for (node, minor) in [("null", "3"), ("random", "8"), ("urandom", "9")] {
            must(
                "mknod",
                Command::new("mknod")
                    .args(["-m", "666"])
                    .arg(fs.join("dev").join(node))
                    .args(["c", "1", minor])
                    .output(),
            );
        }
        // The test build's binaries are dynamically linked: their libraries, where the
        // binaries look for them.
        for lib in &libraries {
            let to = fs.join(lib.strip_prefix("/").expect("ldd names absolute paths"));
            std::fs::create_dir_all(to.parent().expect("a library's directory")).unwrap();
            std::fs::copy(lib, &to).unwrap_or_else(|e| panic!("{}: {e}", lib.display()));
        }
    } else {
        eprintln!("not root: running the exported binaries in place instead of in a chroot");
    }
    let coordinator = "/usr/local/bin/bookfarm-coordinator";
    let worker = "/usr/local/bin/bookfarm-worker";
    let version = env!("CARGO_PKG_VERSION");
    for bin in [coordinator, worker] {
        let out = must("--version", rootfs.command(bin).arg("--version").output());
        assert!(out.trim().ends_with(version), "{bin}: {out}");
    }
    let store = rootfs.path("/var/lib/bookfarm/book.db");
    let out = must(
        "book new",
        rootfs
            .command(coordinator)
            .args(["book", "new", "2", "8", "--db", &store])
            .output(),
    );
    assert!(out.contains("new book in"), "{out}");
    let out = must(
        "book new --if-missing",
        rootfs
            .command(coordinator)
            .args(["book", "new", "2", "8", "--db", &store, "--if-missing"])
            .output(),
    );
    assert!(out.contains("already holds a book; kept"), "{out}");
    // A small `local` build (about 2 s here): coordinator, two in-process workers, book.dat out.
    let local_db = rootfs.path("/var/lib/bookfarm/local.db");
    let book = rootfs.path("/var/lib/bookfarm/book.dat");
    must(
        "local",
        rootfs
            .command(coordinator)
            .args(["local", "--db", &local_db, "--workers", "2", "--level", "4"])
            .args(["--depth", "8", "--out", &book, "--quiet"])
            .output(),
    );
    let b = check_book(&std::fs::read(fs.join("var/lib/bookfarm/book.dat")).unwrap());
    assert!(b.len() > 100, "{} positions", b.len());

    // `serve` from the image answers the image's health check command.
    let http = free_port();
    let mut serve = rootfs.command(coordinator);
    serve
        .args(["serve", "--db", &store, "--listen"])
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("--http")
        .arg(format!("127.0.0.1:{http}"))
        .stdout(std::process::Stdio::null());
    let _serve = Proc(serve.spawn().expect("serve"));
    let health = &stages["coordinator"].healthcheck;
    let url = health[2].replace(":7701/", &format!(":{http}/"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = rootfs
            .command(&health[0])
            .arg(&health[1])
            .arg(&url)
            .output()
            .unwrap();
        if o.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "health check: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
