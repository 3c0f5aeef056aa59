//! Reading `deploy/`: YAML manifests (multi-document, kustomize overlays with JSON patches), the
//! Containerfile's stages, and the command lines the binaries accept (from their `--help`), so
//! that tests check the files against the real programs instead of a list kept by hand.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use yaml_rust2::{Yaml, YamlLoader};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is in the workspace")
        .to_path_buf()
}

/// `deploy/` of the repository.
pub fn deploy_dir() -> PathBuf {
    root().join("deploy")
}

/// Every file under `dir` whose name ends with one of `exts`, sorted.
pub fn files_with(dir: &Path, exts: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.expect("directory entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if exts
                .iter()
                .any(|x| p.to_string_lossy().ends_with(&format!(".{x}")))
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// All documents of a YAML file, with `<<` merge keys applied (compose uses them; YAML 1.2
/// parsers leave them as plain keys).
pub fn load_yaml(path: &Path) -> Vec<Yaml> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_yaml(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Parse YAML text (every document), merge keys applied.
pub fn parse_yaml(text: &str) -> Result<Vec<Yaml>, String> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| e.to_string())?;
    Ok(docs.into_iter().map(merge_keys).collect())
}

fn merge_keys(y: Yaml) -> Yaml {
    match y {
        Yaml::Hash(h) => {
            let mut out = yaml_rust2::yaml::Hash::new();
            let merge = Yaml::String("<<".into());
            if let Some(Yaml::Hash(base)) = h.get(&merge) {
                for (k, v) in base {
                    out.insert(k.clone(), merge_keys(v.clone()));
                }
            }
            for (k, v) in h {
                if k != merge {
                    out.insert(k, merge_keys(v));
                }
            }
            Yaml::Hash(out)
        }
        Yaml::Array(a) => Yaml::Array(a.into_iter().map(merge_keys).collect()),
        other => other,
    }
}

/// A scalar as text (strings, numbers, booleans), or `None`.
pub fn text(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The items of a sequence (empty when absent).
pub fn items(y: &Yaml) -> &[Yaml] {
    y.as_vec().map_or(&[], |v| v.as_slice())
}

/// Strings of a sequence.
pub fn strings(y: &Yaml) -> Vec<String> {
    items(y).iter().filter_map(text).collect()
}

// ---------------------------------------------------------------------------------------------
// kustomize: the subset this repository uses (resources, JSON 6902 patches, generators).

/// One built kustomization: its objects and the generated ConfigMap/Secret keys.
#[derive(Debug, Default)]
pub struct Kustomized {
    /// The objects, patches applied.
    pub objects: Vec<Yaml>,
    /// ConfigMap name → (key → file path), from `configMapGenerator`.
    pub config_maps: BTreeMap<String, BTreeMap<String, PathBuf>>,
    /// Secret name → keys, from `secretGenerator`.
    pub secrets: BTreeMap<String, BTreeSet<String>>,
}

/// Build the kustomization in `dir` as `kubectl apply -k` would for the features used here;
/// panics naming the file on anything it does not understand.
pub fn kustomize(dir: &Path) -> Kustomized {
    let kfile = dir.join("kustomization.yaml");
    let k = load_yaml(&kfile).into_iter().next().expect("one document");
    let mut out = Kustomized::default();
    for r in strings(&k["resources"]) {
        let p = dir.join(&r);
        if p.is_dir() {
            let sub = kustomize(&p);
            out.objects.extend(sub.objects);
            out.config_maps.extend(sub.config_maps);
            out.secrets.extend(sub.secrets);
        } else {
            out.objects.extend(load_yaml(&p));
        }
    }
    for g in items(&k["configMapGenerator"]) {
        let name = text(&g["name"]).expect("generator name");
        let files = strings(&g["files"])
            .into_iter()
            .map(|f| {
                let (key, file) = f.split_once('=').unwrap_or((&f, &f));
                let path = dir.join(file);
                assert!(path.is_file(), "{}: {} missing", kfile.display(), f);
                (
                    Path::new(key)
                        .file_name()
                        .expect("key")
                        .to_string_lossy()
                        .into_owned(),
                    path,
                )
            })
            .collect();
        out.config_maps.insert(name, files);
    }
    for g in items(&k["secretGenerator"]) {
        let name = text(&g["name"]).expect("generator name");
        let mut keys = BTreeSet::new();
        for l in strings(&g["literals"]) {
            keys.insert(l.split_once('=').expect("key=value").0.to_string());
        }
        for f in strings(&g["files"]) {
            let (key, file) = f.split_once('=').unwrap_or((&f, &f));
            assert!(dir.join(file).is_file(), "{}: {f} missing", kfile.display());
            keys.insert(key.to_string());
        }
        out.secrets.insert(name, keys);
    }
    for p in items(&k["patches"]) {
        let kind = text(&p["target"]["kind"]).expect("patch target kind");
        let name = text(&p["target"]["name"]).expect("patch target name");
        let ops = parse_yaml(&text(&p["patch"]).expect("inline patch"))
            .unwrap_or_else(|e| panic!("{}: patch of {kind}/{name}: {e}", kfile.display()));
        let target = out
            .objects
            .iter_mut()
            .find(|o| {
                text(&o["kind"]) == Some(kind.clone())
                    && text(&o["metadata"]["name"]) == Some(name.clone())
            })
            .unwrap_or_else(|| panic!("{}: no {kind}/{name} to patch", kfile.display()));
        for op in items(&ops[0]) {
            apply_op(target, op)
                .unwrap_or_else(|e| panic!("{}: {kind}/{name}: {e}", kfile.display()));
        }
    }
    out
}

/// Apply one JSON 6902 operation (`add` or `replace`), requiring the path to exist as RFC 6902
/// does (kustomize refuses such patches too).
fn apply_op(doc: &mut Yaml, op: &Yaml) -> Result<(), String> {
    let kind = text(&op["op"]).ok_or("op without op")?;
    let path = text(&op["path"]).ok_or("op without path")?;
    let value = op["value"].clone();
    let mut parts: Vec<&str> = path.split('/').skip(1).collect();
    let last = parts.pop().ok_or(format!("{path}: empty path"))?;
    let mut cur = doc;
    for p in &parts {
        cur = step(cur, p).ok_or(format!("{path}: {p} does not exist"))?;
    }
    match (kind.as_str(), cur) {
        ("add", Yaml::Array(a)) if last == "-" => a.push(value),
        ("add", Yaml::Array(a)) => {
            let i: usize = last.parse().map_err(|_| format!("{path}: bad index"))?;
            if i > a.len() {
                return Err(format!("{path}: index out of range"));
            }
            a.insert(i, value);
        }
        ("add", Yaml::Hash(h)) => {
            h.insert(Yaml::String(last.to_string()), value);
        }
        ("replace", c) => {
            let slot = step(c, last).ok_or(format!("{path}: nothing to replace"))?;
            *slot = value;
        }
        (k, _) => return Err(format!("{path}: unsupported op {k}")),
    }
    Ok(())
}

fn step<'a>(y: &'a mut Yaml, p: &str) -> Option<&'a mut Yaml> {
    match y {
        Yaml::Array(a) => a.get_mut(p.parse::<usize>().ok()?),
        Yaml::Hash(h) => h.get_mut(&Yaml::String(p.to_string())),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// The Containerfile.

/// One stage of the Containerfile.
#[derive(Debug, Default, Clone)]
pub struct Stage {
    /// `FROM` image or stage.
    pub from: String,
    /// `ENV` names and values.
    pub env: BTreeMap<String, String>,
    /// `ENTRYPOINT` (exec form).
    pub entrypoint: Vec<String>,
    /// `CMD` (exec form).
    pub cmd: Vec<String>,
    /// `HEALTHCHECK … CMD` (exec form).
    pub healthcheck: Vec<String>,
    /// `EXPOSE` ports.
    pub expose: Vec<u16>,
    /// `USER`.
    pub user: Option<String>,
    /// Destinations of `COPY`.
    pub copies: Vec<String>,
}

/// The stages of `deploy/container/Containerfile` by name, each with what it inherits from a
/// stage it is built `FROM`.
pub fn containerfile() -> BTreeMap<String, Stage> {
    let path = deploy_dir().join("container/Containerfile");
    let raw = std::fs::read_to_string(&path).expect("Containerfile");
    // Join continuation lines, drop comments.
    let mut lines = Vec::new();
    let mut cur = String::new();
    for l in raw.lines() {
        let t = l.trim();
        if t.starts_with('#') || (t.is_empty() && cur.is_empty()) {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(head) => cur.push_str(&format!("{head} ")),
            None => {
                cur.push_str(t);
                lines.push(std::mem::take(&mut cur));
            }
        }
    }
    let json = |s: &str| -> Vec<String> {
        serde_json::from_str(s.trim()).unwrap_or_else(|e| panic!("exec form expected: {s}: {e}"))
    };
    let mut stages: BTreeMap<String, Stage> = BTreeMap::new();
    let mut name = String::new();
    for l in lines {
        let (ins, rest) = l.split_once(' ').unwrap_or((&l, ""));
        let rest = rest.trim();
        if ins == "FROM" {
            let mut w = rest.split_whitespace();
            let from = w.next().expect("FROM image").to_string();
            name = match (w.next(), w.next()) {
                (Some(a), Some(n)) if a.eq_ignore_ascii_case("as") => n.to_string(),
                _ => format!("#{}", stages.len()),
            };
            let mut s = stages.get(&from).cloned().unwrap_or_default();
            s.from = from;
            stages.insert(name.clone(), s);
            continue;
        }
        let Some(s) = stages.get_mut(&name) else {
            continue;
        };
        match ins {
            "ENV" => {
                for kv in rest.split_whitespace() {
                    let (k, v) = kv.split_once('=').expect("ENV NAME=value");
                    s.env.insert(k.into(), v.into());
                }
            }
            "ENTRYPOINT" => s.entrypoint = json(rest),
            "CMD" => s.cmd = json(rest),
            "HEALTHCHECK" => {
                let (_, cmd) = rest.split_once(" CMD ").expect("HEALTHCHECK … CMD [...]");
                s.healthcheck = json(cmd);
            }
            "EXPOSE" => {
                s.expose = rest
                    .split_whitespace()
                    .map(|p| p.parse().expect("port"))
                    .collect()
            }
            "USER" => s.user = Some(rest.to_string()),
            "COPY" => s.copies.push(
                rest.split_whitespace()
                    .last()
                    .expect("COPY destination")
                    .to_string(),
            ),
            _ => {}
        }
    }
    stages
}

/// Whether the external tool `name` (podman, promtool, systemd-analyze) can be run. Without it a
/// test prints why it is skipped and returns; `BOOKFARM_REQUIRE_DEPLOY_TOOLS=1` (set by CI, which
/// installs them) makes a missing tool a failure instead.
pub fn tool_available(name: &str) -> bool {
    let found = Command::new(name)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("BOOKFARM_REQUIRE_DEPLOY_TOOLS").is_none(),
            "BOOKFARM_REQUIRE_DEPLOY_TOOLS is set but {name} is not installed"
        );
        eprintln!("skipped: {name} not installed (CI installs it with apt-get)");
    }
    found
}

// ---------------------------------------------------------------------------------------------
// The binaries' command lines.

/// Where `cargo test` put this workspace's binaries (beside the test executable's `deps/`).
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    let p = dir.join(name);
    assert!(
        p.is_file(),
        "{} not built: run `cargo test --workspace` (it builds bookfarm-coordinator and \
         bookfarm-worker)",
        p.display()
    );
    p
}

/// What one (sub)command accepts, read from its `--help`.
#[derive(Debug, Clone, Default)]
pub struct Help {
    /// Long flags (`--name`).
    pub flags: BTreeSet<String>,
    /// Environment variables (`[env: NAME…]`).
    pub env: BTreeSet<String>,
    /// Subcommand names.
    pub subcommands: BTreeSet<String>,
}

/// A binary and a subcommand path.
type HelpKey = (PathBuf, Vec<String>);

static HELP: Mutex<Option<HashMap<HelpKey, Help>>> = Mutex::new(None);

/// The `--help` of `bin` followed by `path` (subcommands), parsed and cached.
pub fn help(bin: &Path, path: &[String]) -> Help {
    let key = (bin.to_path_buf(), path.to_vec());
    if let Some(h) = HELP
        .lock()
        .expect("help cache")
        .get_or_insert_with(HashMap::new)
        .get(&key)
    {
        return h.clone();
    }
    let out = Command::new(bin)
        .args(path)
        .arg("--help")
        .env("COLUMNS", "400")
        .output()
        .expect("running --help");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} {path:?} --help failed: {}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut h = Help::default();
    let mut in_commands = false;
    for l in text.lines() {
        if l.ends_with(':') && !l.starts_with(' ') {
            in_commands = l == "Commands:";
            continue;
        }
        if let Some(w) = l.split_whitespace().next().filter(|_| in_commands) {
            h.subcommands.insert(w.trim_end_matches(',').to_string());
        }
        for w in l.split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']') {
            if let Some(f) = w.strip_prefix("--").filter(|f| !f.is_empty()) {
                h.flags
                    .insert(format!("--{}", f.split('=').next().unwrap_or(f)));
            }
        }
        let mut rest = l;
        while let Some(i) = rest.find("[env: ") {
            rest = &rest[i + 6..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            h.env.insert(name);
        }
    }
    HELP.lock()
        .expect("help cache")
        .get_or_insert_with(HashMap::new)
        .insert(key, h.clone());
    h
}

/// Check one invocation `bin argv…` with environment `env` against the binary: the subcommands
/// exist, every `--flag` is accepted by the (sub)command, and every `BOOKFARM_*` variable is one
/// it reads. Returns the subcommand path.
pub fn check_invocation(bin: &Path, argv: &[String], env: &[String], what: &str) -> Vec<String> {
    let mut path = Vec::new();
    for a in argv {
        if a.starts_with('-') {
            break;
        }
        let h = help(bin, &path);
        if h.subcommands.contains(a) {
            path.push(a.clone());
        } else {
            break;
        }
    }
    let h = help(bin, &path);
    assert!(
        h.subcommands.is_empty() || !path.is_empty(),
        "{what}: {argv:?} names no subcommand of {}",
        bin.display()
    );
    for a in argv.iter().filter(|a| a.starts_with("--")) {
        let flag = a.split('=').next().unwrap_or(a);
        assert!(
            h.flags.contains(flag),
            "{what}: {} {path:?} has no flag {flag} (it has {:?})",
            bin.display(),
            h.flags
        );
    }
    for e in env.iter().filter(|e| e.starts_with("BOOKFARM_")) {
        assert!(
            h.env.contains(e),
            "{what}: {} {path:?} reads no {e} (it reads {:?})",
            bin.display(),
            h.env
        );
    }
    path
}

/// The host and port of a `host:port` address or a URL.
pub fn host_port(addr: &str) -> (String, u16) {
    let rest = addr.split_once("://").map_or(addr, |(_, r)| r);
    let hp = rest.split('/').next().unwrap_or(rest);
    let (h, p) = hp
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("no port in {addr}"));
    (
        h.to_string(),
        p.parse().unwrap_or_else(|_| panic!("bad port in {addr}")),
    )
}

/// The path of a URL (`/` when it has none).
pub fn url_path(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.find('/').map_or("/".into(), |i| rest[i..].to_string())
}
