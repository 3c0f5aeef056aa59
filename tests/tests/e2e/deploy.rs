//! `deploy/` against the real programs: every manifest parses; every flag, environment variable,
//! port, path and probe the Kubernetes manifests, the compose file, the Containerfile and the
//! systemd units use exists in the binaries (their `--help`, the coordinator's config type, and
//! a live coordinator's HTTP port); every metric the alert rules and the dashboard name is in a
//! live coordinator's `/metrics`.

use bookfarm_coordinator::config::CoordinatorFile;
use bookfarm_coordinator::service::max_lease_duration;
use bookfarm_tests::deploy::{
    Kustomized, binary, check_invocation, containerfile, deploy_dir, files_with, host_port, items,
    kustomize, load_yaml, strings, text, tool_available, url_path,
};
use bookfarm_tests::{Proc, free_port};
use promql_parser::label::MatchOp;
use promql_parser::parser::{Expr, LabelModifier, VectorSelector};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use yaml_rust2::Yaml;

const OVERLAYS: &[&str] = &["k8s/base", "k8s/overlays/demo", "k8s/overlays/production"];

/// The level of the deepest lease the worker pods' grace period must cover (Edax's usual book
/// level, the one the base creates its book at).
const DRAIN_LEVEL: u8 = 21;

#[test]
fn every_manifest_parses() {
    let d = deploy_dir();
    let yamls = files_with(&d, &["yaml", "yml"]);
    assert!(yamls.len() >= 10, "{yamls:?}");
    for f in &yamls {
        let docs = load_yaml(f);
        assert!(
            !docs.is_empty() && docs.iter().all(|y| y.as_hash().is_some()),
            "{}: every document is a mapping",
            f.display()
        );
    }
    for f in files_with(&d, &["json"]) {
        let text = std::fs::read_to_string(&f).unwrap();
        serde_json::from_str::<serde_json::Value>(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
    for o in OVERLAYS {
        let k = kustomize(&d.join(o));
        assert!(!k.objects.is_empty(), "{o}");
        for files in k.config_maps.values() {
            for path in files
                .values()
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            {
                CoordinatorFile::parse(&std::fs::read_to_string(path).unwrap())
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            }
        }
    }
    // The stage names the compose file and the guide build.
    let stages = containerfile();
    for s in ["build", "prebuilt", "base", "worker", "coordinator"] {
        assert!(stages.contains_key(s), "Containerfile stage {s}");
    }
}

fn kind(o: &Yaml) -> String {
    text(&o["kind"]).unwrap_or_default()
}

fn name(o: &Yaml) -> String {
    text(&o["metadata"]["name"]).unwrap_or_default()
}

fn labels(y: &Yaml) -> BTreeMap<String, String> {
    y.as_hash()
        .map(|h| {
            h.iter()
                .filter_map(|(k, v)| Some((text(k)?, text(v)?)))
                .collect()
        })
        .unwrap_or_default()
}

fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The binary a container's command names: `/usr/local/bin/NAME`, a file the image copies there.
fn image_binary(argv0: &str, what: &str) -> PathBuf {
    let name = argv0
        .strip_prefix("/usr/local/bin/")
        .unwrap_or_else(|| panic!("{what}: {argv0} is not in /usr/local/bin"));
    let stages = containerfile();
    assert!(
        stages["base"].copies.iter().any(|c| c == "/usr/local/bin/"),
        "the image copies the binaries to /usr/local/bin/"
    );
    assert!(
        ["bookfarm-coordinator", "bookfarm-worker"].contains(&name),
        "{what}: {name} is not a binary of the image"
    );
    binary(name)
}

/// Absolute paths in arguments and environment values (`--flag=/path` included).
fn paths_in(values: &[String]) -> Vec<String> {
    values
        .iter()
        .map(|v| v.split_once('=').map_or(v.as_str(), |(_, p)| p))
        .filter(|v| v.starts_with('/'))
        .map(str::to_string)
        .collect()
}

#[derive(Debug, Default)]
struct Workload {
    labels: BTreeMap<String, String>,
    ports: BTreeMap<String, u16>,
}

/// Check every container of one built kustomization; returns the HTTP paths probes and scrapes
/// use, and the ServiceMonitor's job label values.
fn check_kubernetes(o: &str, k: &Kustomized) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut paths = BTreeSet::new();
    let mut jobs = BTreeSet::new();
    let mut workloads: BTreeMap<String, Workload> = BTreeMap::new();
    let coordinator_cfg = k
        .config_maps
        .values()
        .flat_map(|f| f.values())
        .find(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| CoordinatorFile::parse(&std::fs::read_to_string(p).unwrap()).unwrap())
        .expect("the coordinator's config map");
    for w in k
        .objects
        .iter()
        .filter(|o| ["StatefulSet", "Deployment"].contains(&kind(o).as_str()))
    {
        let wname = format!("{o}: {}/{}", kind(w), name(w));
        let spec = &w["spec"]["template"]["spec"];
        let mut wl = Workload {
            labels: labels(&w["spec"]["template"]["metadata"]["labels"]),
            ..Workload::default()
        };
        assert!(
            selects(&labels(&w["spec"]["selector"]["matchLabels"]), &wl.labels),
            "{wname}"
        );
        // Volumes by name: config maps and secrets, with the files they provide.
        let mut volume_files: BTreeMap<String, Option<BTreeSet<String>>> = BTreeMap::new();
        for v in items(&spec["volumes"]) {
            let vname = text(&v["name"]).unwrap();
            let files = if let Some(cm) = text(&v["configMap"]["name"]) {
                let keys = k
                    .config_maps
                    .get(&cm)
                    .unwrap_or_else(|| panic!("{wname}: config map {cm} is not generated"));
                Some(keys.keys().cloned().collect())
            } else if let Some(s) = text(&v["secret"]["secretName"]) {
                let listed: BTreeSet<String> = items(&v["secret"]["items"])
                    .iter()
                    .filter_map(|i| text(&i["path"]))
                    .collect();
                if !listed.is_empty() {
                    Some(listed)
                } else {
                    k.secrets.get(&s).cloned()
                }
            } else {
                None
            };
            volume_files.insert(vname, files);
        }
        for v in items(&w["spec"]["volumeClaimTemplates"]) {
            volume_files.insert(name(v), None);
        }
        for c in items(&spec["containers"])
            .iter()
            .chain(items(&spec["initContainers"]))
        {
            let cname = format!("{wname} container {}", text(&c["name"]).unwrap());
            let env: BTreeMap<String, Yaml> = items(&c["env"])
                .iter()
                .map(|e| (text(&e["name"]).unwrap(), e.clone()))
                .collect();
            for e in env.values() {
                if let Some(s) = text(&e["valueFrom"]["secretKeyRef"]["name"]) {
                    let key = text(&e["valueFrom"]["secretKeyRef"]["key"]).unwrap();
                    if let Some(keys) = k.secrets.get(&s) {
                        assert!(keys.contains(&key), "{cname}: secret {s} has no key {key}");
                    }
                }
            }
            let command = strings(&c["command"]);
            let bin = image_binary(&command[0], &cname);
            // Kubernetes expands $(NAME) from the container's environment.
            let expand = |a: &String| -> String {
                match a.strip_prefix("$(").and_then(|r| r.strip_suffix(')')) {
                    Some(n) => text(
                        &env.get(n)
                            .unwrap_or_else(|| panic!("{cname}: $({n}) undefined"))["value"],
                    )
                    .unwrap_or_else(|| panic!("{cname}: $({n}) has no literal value")),
                    None => a.clone(),
                }
            };
            let argv: Vec<String> = command[1..]
                .iter()
                .chain(&strings(&c["args"]))
                .map(expand)
                .collect();
            let referenced: BTreeSet<String> = strings(&c["args"])
                .iter()
                .filter_map(|a| {
                    a.strip_prefix("$(")
                        .and_then(|r| r.strip_suffix(')'))
                        .map(str::to_string)
                })
                .collect();
            let env_names: Vec<String> = env
                .keys()
                .filter(|n| !referenced.contains(*n))
                .cloned()
                .collect();
            let sub = check_invocation(&bin, &argv, &env_names, &cname);
            // Every file the command or environment names is mounted (or is the binary).
            let values: Vec<String> = argv
                .iter()
                .cloned()
                .chain(env.values().filter_map(|e| text(&e["value"])))
                .collect();
            let mounts: Vec<(String, String)> = items(&c["volumeMounts"])
                .iter()
                .map(|m| (text(&m["mountPath"]).unwrap(), text(&m["name"]).unwrap()))
                .collect();
            let under = |p: &str, d: &str| p == d || p.starts_with(&format!("{d}/"));
            // A mount inside another (read-only) volume cannot create its mount point.
            for (a, _) in &mounts {
                for (b, _) in &mounts {
                    assert!(a == b || !under(a, b), "{cname}: {a} is mounted inside {b}");
                }
            }
            for p in paths_in(&values) {
                let (dir, vol) = mounts
                    .iter()
                    .find(|(d, _)| under(&p, d))
                    .unwrap_or_else(|| panic!("{cname}: {p} is on no mounted volume"));
                let files = volume_files
                    .get(vol)
                    .unwrap_or_else(|| panic!("{cname}: volume {vol} is not declared"));
                if let Some(files) = files {
                    let rest = p[dir.len()..].trim_start_matches('/');
                    assert!(
                        files.contains(rest),
                        "{cname}: {p}: volume {vol} has no {rest} ({files:?})"
                    );
                }
            }
            for port in items(&c["ports"]) {
                wl.ports.insert(
                    text(&port["name"]).expect("named port"),
                    text(&port["containerPort"]).unwrap().parse().unwrap(),
                );
            }
            for var in ["BOOKFARM_LISTEN", "BOOKFARM_HTTP"] {
                if let Some(v) = env.get(var).and_then(|e| text(&e["value"])) {
                    let (_, p) = host_port(&v);
                    assert!(
                        wl.ports.values().any(|x| *x == p),
                        "{cname}: {var} port {p} is not a container port"
                    );
                }
            }
            for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
                let g = &c[probe]["httpGet"];
                if let Some(port) = text(&g["port"]) {
                    assert!(wl.ports.contains_key(&port), "{cname}: {probe} port {port}");
                    paths.insert(text(&g["path"]).unwrap());
                }
            }
            if sub == ["run"] {
                // A drained worker pod gets time to finish a leased job of DRAIN_LEVEL.
                let grace = text(&spec["terminationGracePeriodSeconds"])
                    .unwrap()
                    .parse::<u64>()
                    .unwrap();
                let lease = max_lease_duration(DRAIN_LEVEL, &coordinator_cfg.service());
                assert!(
                    grace >= lease.as_secs(),
                    "{cname}: grace {grace} s < lease {lease:?}"
                );
                let url = text(&env["BOOKFARM_COORDINATOR"]["value"]).unwrap();
                let (host, port) = host_port(&url);
                let svc = k
                    .objects
                    .iter()
                    .find(|s| kind(s) == "Service" && name(s) == host)
                    .unwrap_or_else(|| panic!("{cname}: no Service {host}"));
                assert!(
                    items(&svc["spec"]["ports"])
                        .iter()
                        .any(|p| text(&p["port"]) == Some(port.to_string())),
                    "{cname}: Service {host} has no port {port}"
                );
                // One thread per CPU of the limit.
                assert_eq!(
                    text(&env["BOOKFARM_THREADS"]["valueFrom"]["resourceFieldRef"]["resource"])
                        .as_deref(),
                    Some("limits.cpu")
                );
            }
        }
        workloads.insert(format!("{}/{}", kind(w), name(w)), wl);
    }
    let pods = |sel: &BTreeMap<String, String>| -> Vec<&Workload> {
        workloads
            .values()
            .filter(|w| selects(sel, &w.labels))
            .collect()
    };
    for o2 in &k.objects {
        let what = format!("{o}: {}/{}", kind(o2), name(o2));
        match kind(o2).as_str() {
            "Service" => {
                let targets = pods(&labels(&o2["spec"]["selector"]));
                assert!(!targets.is_empty(), "{what} selects no pod");
                for p in items(&o2["spec"]["ports"]) {
                    let t = text(&p["targetPort"]).unwrap();
                    assert!(
                        targets.iter().all(|w| w.ports.contains_key(&t)),
                        "{what}: targetPort {t}"
                    );
                }
            }
            "ServiceMonitor" => {
                let sel = labels(&o2["spec"]["selector"]["matchLabels"]);
                let svcs: Vec<&Yaml> = k
                    .objects
                    .iter()
                    .filter(|s| {
                        kind(s) == "Service" && selects(&sel, &labels(&s["metadata"]["labels"]))
                    })
                    .collect();
                assert!(!svcs.is_empty(), "{what} selects no Service");
                let job_label = text(&o2["spec"]["jobLabel"]).unwrap();
                for s in &svcs {
                    jobs.insert(labels(&s["metadata"]["labels"])[&job_label].clone());
                }
                for e in items(&o2["spec"]["endpoints"]) {
                    let port = text(&e["port"]).unwrap();
                    assert!(
                        svcs.iter()
                            .all(|s| items(&s["spec"]["ports"])
                                .iter()
                                .any(|p| text(&p["name"]) == Some(port.clone()))),
                        "{what}: port {port}"
                    );
                    paths.insert(text(&e["path"]).unwrap());
                }
            }
            "HorizontalPodAutoscaler" => {
                let t = format!(
                    "{}/{}",
                    text(&o2["spec"]["scaleTargetRef"]["kind"]).unwrap(),
                    text(&o2["spec"]["scaleTargetRef"]["name"]).unwrap()
                );
                assert!(workloads.contains_key(&t), "{what}: {t}");
                let max: usize = text(&o2["spec"]["maxReplicas"]).unwrap().parse().unwrap();
                let sessions = coordinator_cfg
                    .identity(&coordinator_cfg.service())
                    .max_sessions_trusted;
                assert!(
                    max <= sessions,
                    "{what}: {max} replicas share one credential of {sessions} sessions"
                );
            }
            "PodDisruptionBudget" => {
                assert!(
                    !pods(&labels(&o2["spec"]["selector"]["matchLabels"])).is_empty(),
                    "{what}"
                );
            }
            _ => {}
        }
    }
    (paths, jobs)
}

/// Every `--flag`, variable, port and path of the Kubernetes manifests.
fn kubernetes_paths_and_jobs() -> (BTreeSet<String>, BTreeSet<String>) {
    let mut paths = BTreeSet::new();
    let mut jobs = BTreeSet::new();
    for o in OVERLAYS {
        let (p, j) = check_kubernetes(o, &kustomize(&deploy_dir().join(o)));
        paths.extend(p);
        jobs.extend(j);
    }
    (paths, jobs)
}

#[test]
fn kubernetes_manifests_match_the_binaries() {
    let (paths, jobs) = kubernetes_paths_and_jobs();
    assert!(
        paths.contains("/healthz") && paths.contains("/readyz") && paths.contains("/metrics"),
        "{paths:?}"
    );
    assert_eq!(jobs, BTreeSet::from(["bookfarm-coordinator".to_string()]));
}

/// The Containerfile's targets, the compose file and the systemd units; returns the HTTP paths
/// they probe or scrape and Prometheus's job names.
fn check_image_compose_systemd() -> (BTreeSet<String>, BTreeSet<String>) {
    let mut paths = BTreeSet::new();
    let stages = containerfile();
    let coordinator_bin = binary("bookfarm-coordinator");
    for t in ["coordinator", "worker"] {
        let s = &stages[t];
        let what = format!("Containerfile target {t}");
        let user = s.user.as_deref().expect("USER");
        assert!(
            !user.starts_with("0") && !user.starts_with("root"),
            "{what}: runs as {user}"
        );
        let bin = image_binary(&s.entrypoint[0], &what);
        let env: Vec<String> = s.env.keys().cloned().collect();
        check_invocation(&bin, &s.cmd, &env, &what);
        for var in ["BOOKFARM_LISTEN", "BOOKFARM_HTTP"] {
            if let Some(v) = s.env.get(var) {
                assert!(
                    s.expose.contains(&host_port(v).1),
                    "{what}: {var} port not exposed"
                );
            }
        }
    }
    let c = &stages["coordinator"];
    let hc = &c.healthcheck;
    assert_eq!(hc[0], stages["coordinator"].entrypoint[0]);
    assert_eq!(
        check_invocation(&coordinator_bin, &hc[1..], &[], "HEALTHCHECK"),
        ["probe"]
    );
    assert_eq!(host_port(&hc[2]).1, host_port(&c.env["BOOKFARM_HTTP"]).1);
    paths.insert(url_path(&hc[2]));
    assert!(
        stages["worker"].healthcheck.is_empty(),
        "a worker serves no HTTP"
    );

    // compose
    let dir = deploy_dir().join("compose");
    let compose = &load_yaml(&dir.join("compose.yaml"))[0];
    let services = compose["services"].as_hash().expect("services");
    let svc = |n: &str| &compose["services"][n];
    let volumes: BTreeSet<String> = compose["volumes"]
        .as_hash()
        .map(|h| h.keys().filter_map(text).collect())
        .unwrap_or_default();
    let mut coordinator_ports = (0, 0);
    for (n, s) in services {
        let n = text(n).unwrap();
        let what = format!("compose service {n}");
        for d in s["depends_on"]
            .as_hash()
            .map(|h| h.keys().filter_map(text).collect::<Vec<_>>())
            .unwrap_or_else(|| strings(&s["depends_on"]))
        {
            assert!(
                services.contains_key(&Yaml::String(d.clone())),
                "{what}: depends on {d}"
            );
        }
        let mounts: Vec<(String, String)> = strings(&s["volumes"])
            .iter()
            .map(|v| {
                let mut p = v.split(':');
                (
                    p.next().unwrap().to_string(),
                    p.next().expect("source:target").to_string(),
                )
            })
            .collect();
        for (src, _) in &mounts {
            if src.starts_with('.') {
                assert!(dir.join(src).exists(), "{what}: {src} missing");
            } else {
                assert!(volumes.contains(src), "{what}: volume {src} not declared");
            }
        }
        let Some(target) = text(&s["build"]["target"]) else {
            continue;
        };
        assert_eq!(
            text(&s["build"]["dockerfile"]).as_deref(),
            Some("deploy/container/Containerfile"),
            "{what}"
        );
        let stage = stages
            .get(&target)
            .unwrap_or_else(|| panic!("{what}: no stage {target}"));
        let bin = image_binary(&stage.entrypoint[0], &what);
        let argv = if s["command"].is_badvalue() {
            stage.cmd.clone()
        } else {
            strings(&s["command"])
        };
        let env: BTreeMap<String, String> = labels(&s["environment"]);
        let names: Vec<String> = env.keys().cloned().collect();
        let sub = check_invocation(&bin, &argv, &names, &what);
        let values: Vec<String> = argv.iter().cloned().chain(env.values().cloned()).collect();
        for p in paths_in(&values) {
            assert!(
                mounts
                    .iter()
                    .any(|(_, t)| p.starts_with(&format!("{t}/")) || p == *t),
                "{what}: {p} on no volume"
            );
        }
        for p in strings(&s["ports"]) {
            let container: u16 = p.rsplit(':').next().unwrap().parse().unwrap();
            assert!(
                stage.expose.contains(&container),
                "{what}: port {container} not exposed"
            );
        }
        if sub == ["serve"] {
            coordinator_ports = (
                host_port(&env["BOOKFARM_LISTEN"]).1,
                host_port(&env["BOOKFARM_HTTP"]).1,
            );
        }
    }
    let worker_env = labels(&svc("worker")["environment"]);
    assert_eq!(
        host_port(&worker_env["BOOKFARM_COORDINATOR"]),
        ("coordinator".into(), coordinator_ports.0)
    );
    let prom = &load_yaml(&deploy_dir().join("prometheus/prometheus.yml"))[0];
    let mut jobs = BTreeSet::new();
    for sc in items(&prom["scrape_configs"]) {
        jobs.insert(text(&sc["job_name"]).unwrap());
        paths.insert(text(&sc["metrics_path"]).unwrap_or_else(|| "/metrics".into()));
        for t in items(&sc["static_configs"])
            .iter()
            .flat_map(|s| strings(&s["targets"]))
        {
            assert_eq!(
                t,
                format!("coordinator:{}", coordinator_ports.1),
                "Prometheus target"
            );
        }
    }
    let rules: Vec<String> = strings(&prom["rule_files"]);
    let mounted: Vec<String> = strings(&svc("prometheus")["volumes"]);
    for r in &rules {
        assert!(
            mounted
                .iter()
                .any(|m| m.split(':').nth(1) == Some(r.as_str())),
            "rule file {r} is mounted"
        );
    }
    let ds = &load_yaml(&deploy_dir().join("grafana/provisioning/datasources/prometheus.yml"))[0];
    let url = text(&items(&ds["datasources"])[0]["url"]).unwrap();
    assert!(
        services.contains_key(&Yaml::String(host_port(&url).0)),
        "Grafana's datasource {url}"
    );

    // systemd: ExecStart against the binaries, every BOOKFARM_ variable the unit names, and the
    // hardening the guide promises.
    for f in files_with(&deploy_dir().join("systemd"), &["service"]) {
        let what = f.display().to_string();
        let unit = std::fs::read_to_string(&f).unwrap();
        let keys: BTreeMap<&str, &str> = unit
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once('='))
            .collect();
        let exec: Vec<String> = keys["ExecStart"]
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let bin = image_binary(&exec[0], &what);
        let vars: Vec<String> = unit
            .split(|c: char| !(c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit()))
            .filter(|w| w.starts_with("BOOKFARM_"))
            .map(str::to_string)
            .collect();
        check_invocation(&bin, &exec[1..], &vars, &what);
        for k in [
            "DynamicUser",
            "ProtectSystem",
            "NoNewPrivileges",
            "LimitNOFILE",
            "CapabilityBoundingSet",
        ] {
            assert!(keys.contains_key(k), "{what}: {k}");
        }
        if what.contains("worker") {
            assert!(
                keys.contains_key("Nice") && unit.contains("CPUQuota="),
                "{what}: desktop options"
            );
        }
    }
    (paths, jobs)
}

/// `systemd-analyze verify` on the units (binary paths pointed at the built binaries): no
/// unknown key, no value systemd would ignore.
#[test]
fn systemd_accepts_the_units() {
    if !tool_available("systemd-analyze") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let bin_dir = binary("bookfarm-coordinator")
        .parent()
        .unwrap()
        .display()
        .to_string();
    let mut units = Vec::new();
    for f in files_with(&deploy_dir().join("systemd"), &["service"]) {
        let text = std::fs::read_to_string(&f)
            .unwrap()
            .replace("/usr/local/bin", &bin_dir);
        // A template is verified as one of its instances.
        let name = f
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace("@.", "@main.");
        std::fs::write(tmp.path().join(&name), text).unwrap();
        units.push(tmp.path().join(name));
    }
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .args(&units)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.trim().is_empty(), "{err}");
}

/// promtool accepts the rule file and the demo's Prometheus configuration, and the rules' unit
/// tests (`alerts_test.yml`: each alert firing on its condition and quiet otherwise) pass.
#[test]
fn promtool_accepts_the_rules_and_their_tests() {
    if !tool_available("promtool") {
        return;
    }
    let dir = deploy_dir().join("prometheus");
    let promtool = |args: &[&str], cwd: &std::path::Path| {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(cwd)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    promtool(&["check", "rules", "alerts.yml"], &dir);
    promtool(&["test", "rules", "alerts_test.yml"], &dir);
    // The configuration names the rule file where compose mounts it; check a copy naming the
    // repository's file instead.
    let tmp = tempfile::tempdir().unwrap();
    let config = std::fs::read_to_string(dir.join("prometheus.yml"))
        .unwrap()
        .replace(
            "/etc/prometheus/alerts.yml",
            &dir.join("alerts.yml").display().to_string(),
        );
    std::fs::write(tmp.path().join("prometheus.yml"), config).unwrap();
    promtool(&["check", "config", "prometheus.yml"], tmp.path());
}

/// Every alert of `alerts.yml` has a unit test in `alerts_test.yml` where it fires, carrying
/// the rule's own labels, and one where it stays quiet; the tests name no other alert (promtool
/// accepts `exp_alerts: []` for an alert that does not exist, so a misspelt name would test
/// nothing). Needs no promtool: it holds wherever the repository is checked out.
#[test]
fn every_alert_has_a_firing_and_a_quiet_unit_test() {
    let dir = deploy_dir().join("prometheus");
    let rules = &load_yaml(&dir.join("alerts.yml"))[0];
    let mut alerts: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for g in items(&rules["groups"]) {
        for r in items(&g["rules"]) {
            let name = text(&r["alert"]).expect("an alerting rule");
            assert!(
                alerts.insert(name.clone(), labels(&r["labels"])).is_none(),
                "{name} defined twice"
            );
        }
    }
    assert!(alerts.len() >= 10, "{alerts:?}");
    let tests = &load_yaml(&dir.join("alerts_test.yml"))[0];
    assert_eq!(strings(&tests["rule_files"]), ["alerts.yml"]);
    let (mut firing, mut quiet) = (BTreeSet::new(), BTreeSet::new());
    for t in items(&tests["tests"]) {
        for case in items(&t["alert_rule_test"]) {
            let name = text(&case["alertname"]).expect("alertname");
            let rule = alerts
                .get(&name)
                .unwrap_or_else(|| panic!("alerts_test.yml tests {name}, which alerts.yml lacks"));
            let expected = items(&case["exp_alerts"]);
            if expected.is_empty() {
                quiet.insert(name);
                continue;
            }
            for e in expected {
                let got = labels(&e["exp_labels"]);
                for (k, v) in rule {
                    assert_eq!(got.get(k), Some(v), "{name}: label {k} of a firing case");
                }
            }
            firing.insert(name);
        }
    }
    for name in alerts.keys() {
        assert!(firing.contains(name), "no unit test shows {name} firing");
        assert!(quiet.contains(name), "no unit test shows {name} quiet");
    }
}

#[test]
fn image_compose_and_systemd_match_the_binaries() {
    let (paths, jobs) = check_image_compose_systemd();
    assert!(
        paths.contains("/healthz") && paths.contains("/metrics"),
        "{paths:?}"
    );
    assert_eq!(jobs, BTreeSet::from(["bookfarm-coordinator".to_string()]));
}

// ---------------------------------------------------------------------------------------------
// The operators' kit against a live coordinator.

/// GET `url`; the status and the body.
fn get(url: &str) -> (u16, String) {
    use http_body_util::BodyExt;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<http_body_util::Empty<bytes::Bytes>>();
        let r = tokio::time::timeout(Duration::from_secs(5), client.get(url.parse().unwrap()))
            .await
            .expect("answer in time")
            .expect("GET");
        let status = r.status().as_u16();
        let body = r.into_body().collect().await.expect("body").to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    })
}

/// Series in a Prometheus text exposition: name → label name → the values seen.
fn scrape_series(body: &str) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut out: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for l in body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let end = l.find(['{', ' ']).unwrap_or(l.len());
        let labels = out.entry(l[..end].to_string()).or_default();
        if let Some(inner) = l[end..]
            .strip_prefix('{')
            .and_then(|r| r.split_once('}'))
            .map(|(i, _)| i)
        {
            for kv in inner.split(',') {
                if let Some((k, v)) = kv.split_once('=') {
                    labels
                        .entry(k.trim().to_string())
                        .or_default()
                        .insert(v.trim().trim_matches('"').to_string());
                }
            }
        }
    }
    out
}

/// A coordinator (`serve`) with one worker (`run`) that has delivered results, both the real
/// binaries; killed on drop.
struct Live {
    http: u16,
    _dir: tempfile::TempDir,
    _procs: Vec<Proc>,
}

fn live() -> Live {
    let coord = binary("bookfarm-coordinator");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db").display().to_string();
    let s = |x: &str| x.to_string();
    let out = Command::new(&coord)
        .args(["book", "new", "2", "8", "--db", &db])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (grpc, http) = (free_port(), free_port());
    let serve = Proc::spawn(
        coord.to_str().unwrap(),
        &[
            s("serve"),
            s("--db"),
            db.clone(),
            s("--listen"),
            format!("127.0.0.1:{grpc}"),
            s("--http"),
            format!("127.0.0.1:{http}"),
        ],
    );
    let url = format!("http://127.0.0.1:{grpc}");
    let worker = Proc::spawn(
        binary("bookfarm-worker").to_str().unwrap(),
        &[
            s("run"),
            s("--coordinator"),
            url.clone(),
            s("--threads"),
            s("1"),
            s("--name"),
            s("w1"),
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ok = Command::new(&coord)
            .args(["expand", "deviate", "2", "4", "--coordinator", &url])
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        if ok.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "expand: {}",
            String::from_utf8_lossy(&ok.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let l = Live {
        http,
        _dir: dir,
        _procs: vec![serve, worker],
    };
    // Results accepted and the worker's own series out.
    loop {
        let (_, body) = get(&format!("http://127.0.0.1:{http}/metrics"));
        if body.contains("bookfarm_worker_completed{worker=\"w1\"}")
            && !body.contains("bookfarm_jobs_completed_total 0")
        {
            return l;
        }
        assert!(
            Instant::now() < deadline,
            "no result accepted within 60 s:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[derive(Default)]
struct Selectors {
    /// (metric name, label names matched, with the value of each equality matcher).
    found: Vec<(String, BTreeMap<String, Option<String>>)>,
    grouping: BTreeSet<String>,
}

impl promql_parser::util::ExprVisitor for Selectors {
    type Error = ();
    fn pre_visit(&mut self, e: &Expr) -> Result<bool, ()> {
        let mut add = |vs: &VectorSelector| {
            let name = vs.name.clone().unwrap_or_default();
            let labels = vs
                .matchers
                .matchers
                .iter()
                .map(|m| {
                    let value = matches!(m.op, MatchOp::Equal).then(|| m.value.clone());
                    (m.name.clone(), value)
                })
                .collect();
            self.found.push((name, labels));
        };
        match e {
            Expr::VectorSelector(vs) => add(vs),
            Expr::MatrixSelector(m) => add(&m.vs),
            Expr::Aggregate(a) => {
                if let Some(LabelModifier::Include(l)) = &a.modifier {
                    self.grouping.extend(l.labels.iter().cloned());
                }
            }
            _ => {}
        }
        Ok(true)
    }
}

/// Parse one PromQL expression; its selectors and grouping labels.
fn selectors(expr: &str, what: &str) -> Selectors {
    let e =
        promql_parser::parser::parse(expr).unwrap_or_else(|err| panic!("{what}: {expr}: {err}"));
    let mut s = Selectors::default();
    promql_parser::util::walk_expr(&mut s, &e).expect("walk");
    s
}

/// The expressions of the alert rules and the dashboard, each with the labels its output names
/// (`{{worker}}` in a legend).
fn kit_expressions() -> Vec<(String, String, BTreeSet<String>)> {
    let mut out = Vec::new();
    let alerts = &load_yaml(&deploy_dir().join("prometheus/alerts.yml"))[0];
    for g in items(&alerts["groups"]) {
        for r in items(&g["rules"]) {
            let what = format!("alert {}", text(&r["alert"]).unwrap());
            out.push((what, text(&r["expr"]).unwrap(), BTreeSet::new()));
        }
    }
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(deploy_dir().join("grafana/bookfarm.json")).unwrap(),
    )
    .unwrap();
    for p in dash["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().expect("targets") {
            let legend = t["legendFormat"].as_str().unwrap_or("");
            let used = legend
                .split("{{")
                .skip(1)
                .filter_map(|s| s.split_once("}}").map(|(l, _)| l.trim().to_string()))
                .collect();
            out.push((
                format!("panel {}", p["title"]),
                t["expr"].as_str().unwrap().to_string(),
                used,
            ));
        }
    }
    out
}

#[test]
fn operators_kit_names_only_what_a_live_coordinator_serves() {
    let live = live();
    let base = format!("http://127.0.0.1:{}", live.http);
    let (_, body) = get(&format!("{base}/metrics"));
    let series = scrape_series(&body);
    // Every metric of the registry is out, whatever happened so far.
    for m in bookfarm_coordinator::telemetry::METRICS {
        let name = match m.kind {
            bookfarm_coordinator::telemetry::Kind::Histogram => format!("{}_count", m.name),
            _ => m.name.to_string(),
        };
        assert!(
            series.contains_key(&name),
            "{name} missing from /metrics:\n{body}"
        );
    }
    let (_, k8s_jobs) = kubernetes_paths_and_jobs();
    let (_, prom_jobs) = check_image_compose_systemd();
    let kit = kit_expressions();
    assert!(kit.len() >= 15, "{kit:?}");
    let mut named = BTreeSet::new();
    for (what, expr, legend) in &kit {
        let s = selectors(expr, what);
        assert!(!s.found.is_empty(), "{what}: {expr} selects nothing");
        let mut available = BTreeSet::new();
        for (name, matched) in &s.found {
            if name == "up" {
                // Prometheus's own series for a scrape job: the job must be one we configure.
                assert!(matched.contains_key("job"), "{what}: up without a job");
                let job = expr
                    .split("job=\"")
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                    .unwrap();
                assert!(
                    prom_jobs.contains(job) && k8s_jobs.contains(job),
                    "{what}: job {job}"
                );
                continue;
            }
            let labels = series
                .get(name)
                .unwrap_or_else(|| panic!("{what}: {name} is not in the coordinator's /metrics"));
            for (l, value) in matched {
                let values = labels
                    .get(l)
                    .unwrap_or_else(|| panic!("{what}: {name} has no label {l}"));
                // An equality matcher selects a series the coordinator serves from its first
                // scrape (a kind counted at 0 before its first event).
                if let Some(v) = value {
                    assert!(
                        values.contains(v),
                        "{what}: {name}{{{l}=\"{v}\"}} is not in /metrics: {l} takes {values:?}"
                    );
                }
            }
            available.extend(labels.keys().cloned());
            named.insert(name.clone());
        }
        for l in s.grouping.iter().chain(legend) {
            assert!(
                available.contains(l),
                "{what}: label {l} is on none of its series"
            );
        }
    }
    // The four conditions the kit exists for.
    let alerts: Vec<&str> = kit
        .iter()
        .filter(|(w, _, _)| w.starts_with("alert"))
        .map(|(_, e, _)| e.as_str())
        .collect();
    for (m, why) in [
        ("bookfarm_workers", "no workers"),
        ("bookfarm_jobs_completed_total", "throughput zero"),
        ("bookfarm_jobs_expired_total", "lease expiries rising"),
        ("bookfarm_store_errors_total", "store errors"),
    ] {
        assert!(alerts.iter().any(|e| e.contains(m)), "no alert for {why}");
    }
    // Every path a probe, health check or scrape config uses answers 200; others 404.
    let (mut paths, _) = kubernetes_paths_and_jobs();
    paths.extend(check_image_compose_systemd().0);
    for p in &paths {
        let (status, _) = get(&format!("{base}{p}"));
        assert_eq!(status, 200, "{p}");
    }
    assert_eq!(get(&format!("{base}/nothing-here")).0, 404);
    // The image's health check command, pointed at this coordinator.
    let coord = binary("bookfarm-coordinator");
    let probe = |url: &str| {
        Command::new(&coord)
            .args(["probe", url])
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(probe(&format!("{base}/healthz")));
    assert!(!probe(&format!("{base}/nothing-here")));
    assert!(!probe(&format!("http://127.0.0.1:{}/healthz", free_port())));
}

/// What journald, `kubectl logs` and aggregators read: both binaries, stderr to a file, write
/// no colour codes; with `--log-format json` every line is one JSON object with a level and
/// fields. The lines checked are the coordinator's "grpc listening" and the worker's
/// "registered" (a serve and a worker against it).
#[test]
fn logs_off_a_terminal_are_plain_text_and_json_on_request() {
    let coord = binary("bookfarm-coordinator");
    let worker = binary("bookfarm-worker");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db").display().to_string();
    let out = Command::new(&coord)
        .args(["book", "new", "2", "8", "--db", &db])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for json in [false, true] {
        let fmt: &[String] = if json {
            &["--log-format".to_string(), "json".to_string()]
        } else {
            &[]
        };
        let grpc = free_port();
        let clog = dir.path().join(format!("coordinator-{json}.log"));
        let wlog = dir.path().join(format!("worker-{json}.log"));
        let mut args = vec![
            "serve".to_string(),
            "--db".into(),
            db.clone(),
            "--listen".into(),
            format!("127.0.0.1:{grpc}"),
        ];
        args.extend_from_slice(fmt);
        let _serve = Proc::spawn_logged(coord.to_str().unwrap(), &args, &[], &clog);
        let mut args = vec![
            "run".to_string(),
            "--coordinator".into(),
            format!("http://127.0.0.1:{grpc}"),
            "--threads".into(),
            "1".into(),
        ];
        args.extend_from_slice(fmt);
        let _worker = Proc::spawn_logged(worker.to_str().unwrap(), &args, &[], &wlog);
        let deadline = Instant::now() + Duration::from_secs(60);
        for (log, line) in [(&clog, "grpc listening"), (&wlog, "registered")] {
            let text = loop {
                let text = std::fs::read_to_string(log).unwrap_or_default();
                if text.contains(line) {
                    break text;
                }
                assert!(
                    Instant::now() < deadline,
                    "{}: no {line:?} within 60 s:\n{text}",
                    log.display()
                );
                std::thread::sleep(Duration::from_millis(100));
            };
            assert!(
                !text.contains('\x1b'),
                "{}: colour codes in a log file:\n{text}",
                log.display()
            );
            if json {
                for l in text.lines() {
                    let v: serde_json::Value = serde_json::from_str(l)
                        .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {l}", log.display()));
                    assert!(v["level"].is_string() && v["fields"].is_object(), "{l}");
                }
                assert!(
                    text.lines()
                        .any(|l| l.contains(&format!("\"message\":\"{line}\""))),
                    "{text}"
                );
            } else {
                assert!(
                    text.lines()
                        .any(|l| l.contains(" INFO ") && l.contains(line)),
                    "{text}"
                );
            }
        }
    }
}
