//! Steward against software it did not write: a real DKIM signer (`dkimpy`) with its key
//! served by a DNS server on loopback (`dnspython`), the official webhook signers
//! (`standardwebhooks`, `stripe`, GitHub's `@octokit/webhooks-methods`), `croniter`'s reading
//! of cron expressions, MCP servers built on the official SDK (`mcp`) and the reference
//! servers (`mcp-server-time`, `mcp-server-git`), and the LiteLLM proxy in front of both
//! model providers.
//!
//! The packages come from PyPI (and npm) into the venv of `scripts/interop-venv.sh`
//! (`.ci/run` runs it). A test whose package did not install is built `#[ignore]`d with the reason (see
//! `daemon/build.rs`), so it counts as skipped — never as passed.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::mail;
use crate::support::{TestDaemon, stdout};

/// The venv's interpreter.
fn python() -> PathBuf {
    PathBuf::from(env!("STEWARD_INTEROP_VENV")).join("bin/python")
}

/// Runs `script` with the venv's Python; its stdout, or a panic with its stderr.
fn run_python(dir: &Path, script: &str, args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let path = dir.join("script.py");
    std::fs::write(&path, script).unwrap();
    let mut child = Command::new(python())
        .arg(&path)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{script}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// A DNS server (dnspython) on 127.0.0.1 answering TXT queries for one name; killed on drop.
struct DnsServer {
    child: Child,
    port: u16,
}

const DNS_SERVER: &str = r#"
import socket, sys
import dns.message, dns.rrset, dns.rdatatype, dns.rcode
name, record = sys.argv[1], sys.argv[2]
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.bind(("127.0.0.1", 0))
print(sock.getsockname()[1], flush=True)
chunks = [record[i:i + 255] for i in range(0, len(record), 255)]
txt = " ".join('"%s"' % c for c in chunks)
while True:
    data, peer = sock.recvfrom(4096)
    try:
        query = dns.message.from_wire(data)
    except Exception:
        continue
    response = dns.message.make_response(query)
    question = query.question[0]
    if question.name.to_text().lower() == name.lower() and question.rdtype == dns.rdatatype.TXT:
        response.answer.append(dns.rrset.from_text(question.name, 60, "IN", "TXT", txt))
    else:
        response.set_rcode(dns.rcode.NXDOMAIN)
    sock.sendto(response.to_wire(), peer)
"#;

impl DnsServer {
    fn start(dir: &Path, name: &str, record: &str) -> Self {
        let path = dir.join("dns_server.py");
        std::fs::write(&path, DNS_SERVER).unwrap();
        let mut child = Command::new(python())
            .arg(&path)
            .args([name, record])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the DNS server's port");
        Self { child, port }
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const DKIM_SIGN: &str = r#"
import sys, dkim
key = open(sys.argv[1], "rb").read()
message = sys.stdin.buffer.read()
signature = dkim.sign(message, b"s1", sys.argv[2].encode(), key,
    include_headers=[b"From", b"To", b"Subject", b"Message-ID", b"Date"],
    length=(sys.argv[3] == "with-length"))
sys.stdout.buffer.write(signature + message)
"#;

/// An RSA key pair by openssl: (private key PEM path, DKIM TXT record).
fn dkim_key(dir: &Path) -> (PathBuf, String) {
    let key = dir.join("dkim.pem");
    let status = Command::new("openssl")
        .args(["genrsa", "-out"])
        .arg(&key)
        .arg("2048")
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let public = Command::new("openssl")
        .args(["rsa", "-pubout", "-outform", "DER", "-in"])
        .arg(&key)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let encoded = steward_daemon::channels::http::verify::base64_encode(&public.stdout);
    (key, format!("v=DKIM1; k=rsa; p={encoded}"))
}

#[cfg_attr(
    not(all(interop_dkimpy, interop_dnspython)),
    ignore = "needs PyPI dkimpy and dnspython in the interop venv (scripts/interop-venv.sh)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_signed_by_dkimpy_is_authenticated_through_a_dns_server_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let (key, record) = dkim_key(dir.path());
    let dns = DnsServer::start(dir.path(), "s1._domainkey.example.test.", &record);
    let (assistant, owner) = (mail::address("steward"), mail::address("owner"));
    mail::stack();
    let extra = format!(
        "dns_servers = [\"127.0.0.1:{}\"]\nunknown_senders = \"reject\"\n",
        dns.port
    );
    let daemon = TestDaemon::start_with_env(
        &mail::config(&assistant, &owner, &extra),
        &[(mail::PASSWORD_ENV, mail::PASSWORD)],
    );
    let sign = |body: &str, length: &str| {
        let raw = mail::message(&owner, &assistant, "Signed plan", body, "", false);
        let domain = "example.test";
        let key = key.display().to_string();
        String::from_utf8(run_python(
            dir.path(),
            DKIM_SIGN,
            &[&key, domain, length],
            raw.as_bytes(),
        ))
        .unwrap()
    };
    let signed = sign("The plan stands.", "plain");
    let tampered = sign("The plan stands.", "plain").replace("The plan stands.", "Wire the money.");
    let with_length = sign("The plan stands.", "with-length") + "P.S. appended by anyone\r\n";
    for raw in [&signed, &tampered, &with_length] {
        assert!(raw.starts_with("DKIM-Signature:"), "{raw}");
        mail::deliver(&owner, &assistant, raw.as_bytes()).await;
    }
    let events = daemon.events_on("email:", 3).await;
    let event_with = |needle: &str, not: &str| {
        events
            .iter()
            .find(|e| e.text.contains(needle) && !e.text.contains(not))
            .cloned()
            .unwrap_or_else(|| panic!("no event with {needle:?}: {events:#?}"))
    };
    let good = event_with("The plan stands.", "appended by anyone");
    assert_eq!(good.trust, steward_events::Trust::Owner, "{good:#?}");
    assert_ne!(good.state, "rejected", "{good:#?}");
    let bad = event_with("Wire the money.", "\u{0}");
    assert_eq!(
        bad.state, "rejected",
        "a body that changed after signing: {bad:#?}"
    );
    let cut = event_with("appended by anyone", "\u{0}");
    assert_eq!(cut.state, "rejected", "{cut:#?}");
    let why = cut.detail.unwrap_or_default();
    assert!(why.contains("body-length limit (l=)"), "{why}");
}

const STANDARD_SIGN: &str = r#"
import sys, json, datetime
from standardwebhooks.webhooks import Webhook
secret, msg_id, body = sys.argv[1], sys.argv[2], sys.stdin.read()
now = datetime.datetime.now(tz=datetime.timezone.utc)
signature = Webhook(secret).sign(msg_id, now, body)
print(json.dumps({"webhook-id": msg_id, "webhook-timestamp": str(int(now.timestamp())), "webhook-signature": signature}))
"#;

const STRIPE_SIGN: &str = r#"
import sys, time, stripe
secret, body = sys.argv[1], sys.stdin.read()
timestamp = int(time.time())
signature = stripe.WebhookSignature._compute_signature("%d.%s" % (timestamp, body), secret)
header = "t=%d,v1=%s" % (timestamp, signature)
# The library's own verifier accepts what it signed.
stripe.WebhookSignature.verify_header(body, header, secret, tolerance=300)
print(header)
"#;

fn base(daemon: &TestDaemon) -> String {
    let address = std::fs::read_to_string(daemon.path().join("http.addr")).unwrap();
    format!("http://{address}")
}

#[cfg_attr(
    not(all(interop_standardwebhooks, interop_stripe)),
    ignore = "needs PyPI standardwebhooks and stripe in the interop venv (scripts/interop-venv.sh)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_standard_webhooks_and_stripe_signers_are_accepted() {
    let standard_secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let stripe_secret = "whsec_test_stripe_secret";
    let daemon = TestDaemon::start_with_env(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[[webhook.routes]]\nname = \"std\"\nauth = \"standard\"\nsecret_env = \"T_STD\"\ntext = \"std {body.type}\"\n\n[[webhook.routes]]\nname = \"pay\"\nauth = \"stripe\"\nsecret_env = \"T_STRIPE\"\ntext = \"stripe {body.type}\"\n",
        &[("T_STD", standard_secret), ("T_STRIPE", stripe_secret)],
    );
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let base = base(&daemon);

    let body = r#"{"type":"invoice.paid","data":{"amount":4200,"note":"grüße"}}"#;
    let headers: Value = serde_json::from_slice(&run_python(
        dir.path(),
        STANDARD_SIGN,
        &[standard_secret, "msg_interop_1"],
        body.as_bytes(),
    ))
    .unwrap();
    let mut request = client.post(format!("{base}/hooks/std")).body(body);
    for (name, value) in headers.as_object().unwrap() {
        request = request.header(name, value.as_str().unwrap());
    }
    assert_eq!(request.send().await.unwrap().status(), 202);
    // The same signature over another body is refused.
    let mut forged = client
        .post(format!("{base}/hooks/std"))
        .body(body.replace("4200", "1"));
    for (name, value) in headers.as_object().unwrap() {
        forged = forged.header(name, value.as_str().unwrap());
    }
    assert_eq!(forged.send().await.unwrap().status(), 401);

    let stripe_body = r#"{"id":"evt_1","type":"payment_intent.succeeded"}"#;
    let header = String::from_utf8(run_python(
        dir.path(),
        STRIPE_SIGN,
        &[stripe_secret],
        stripe_body.as_bytes(),
    ))
    .unwrap();
    let response = client
        .post(format!("{base}/hooks/pay"))
        .header("Stripe-Signature", header.trim())
        .body(stripe_body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);

    let events = daemon.events_on("webhook:", 2).await;
    let texts: Vec<&str> = events.iter().map(|e| e.text.as_str()).collect();
    assert!(
        texts.iter().any(|t| t.starts_with("std invoice.paid")),
        "{texts:#?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("stripe payment_intent.succeeded")),
        "{texts:#?}"
    );
}

const CRONITER_NEXT: &str = r#"
import sys, json, datetime
from croniter import croniter
start = datetime.datetime.fromisoformat(sys.argv[1])
out = {}
for expr in sys.stdin.read().splitlines():
    it = croniter(expr, start)
    out[expr] = [it.get_next(datetime.datetime).strftime("%Y-%m-%dT%H:%M:%S") for _ in range(3)]
print(json.dumps(out))
"#;

#[cfg_attr(
    not(interop_croniter),
    ignore = "needs PyPI croniter in the interop venv (scripts/interop-venv.sh)"
)]
#[test]
fn the_next_runs_agree_with_croniter() {
    let expressions = [
        "*/7 * * * *",
        "0 9 * * 1-5",
        "30 2 1,15 * *",
        "0 0 1W 5 *",
        "0 0 31W 10 *",
        "0 12 15W * *",
        "0 0 L * *",
        "0 18 * * 5#2",
        "@daily",
        "@hourly",
        "@weekly",
        "@monthly",
        "@yearly",
        "0 0 29 2 *",
        "5 4 * JAN-MAR SUN",
    ];
    let dir = tempfile::tempdir().unwrap();
    let start = "2027-01-01T00:00:00+00:00";
    let expected: Value = serde_json::from_slice(&run_python(
        dir.path(),
        CRONITER_NEXT,
        &[start],
        expressions.join("\n").as_bytes(),
    ))
    .unwrap();
    let at = chrono::DateTime::parse_from_rfc3339(start)
        .unwrap()
        .with_timezone(&chrono::Utc);
    for expr in expressions {
        let schedule = steward_daemon::channels::timer::schedule::parse_schedule(
            expr,
            at,
            steward_daemon::zone::Zone::UTC,
        )
        .unwrap();
        let ours: Vec<String> = schedule
            .between(
                at,
                at + chrono::Duration::days(4000),
                steward_daemon::zone::Zone::UTC,
                3,
            )
            .iter()
            .map(|t| t.naive_utc().format("%Y-%m-%dT%H:%M:%S").to_string())
            .collect();
        let theirs: Vec<String> = expected[expr]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(ours, theirs, "{expr}");
    }
}

/// Prints, for each `zone epoch` line, the instant's local time, offset and abbreviation as
/// Python's own `zoneinfo` reads them from the system's time zone database.
const ZONEINFO_LOCAL: &str = r#"
import sys, datetime, zoneinfo
for line in sys.stdin.read().splitlines():
    zone, epoch = line.split()
    at = datetime.datetime.fromtimestamp(int(epoch), zoneinfo.ZoneInfo(zone))
    print(at.strftime("%Y-%m-%dT%H:%M:%S%z"), at.tzname())
"#;

#[cfg_attr(
    not(interop_croniter),
    ignore = "needs the interop venv (scripts/interop-venv.sh)"
)]
#[test]
fn instants_in_the_owners_zone_agree_with_pythons_zoneinfo() {
    use chrono::TimeZone;
    let zones = [
        "Europe/Berlin",
        "America/New_York",
        "America/Sao_Paulo",
        "Australia/Lord_Howe",
        "Pacific/Chatham",
        "Asia/Kolkata",
        "Africa/Casablanca",
        "America/St_Johns",
    ];
    // Every 11 days and 7 hours from 1990 to 2100: the listed transitions and the years past
    // them, where only the zone's rule says when summer time starts.
    let instants: Vec<i64> = (631_152_000_i64..4_102_444_800)
        .step_by(11 * 86_400 + 7 * 3_600)
        .collect();
    let mut lines = String::new();
    for zone in zones {
        for at in &instants {
            lines.push_str(&format!("{zone} {at}\n"));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let expected = run_python(dir.path(), ZONEINFO_LOCAL, &[], lines.as_bytes());
    let mut expected = std::str::from_utf8(&expected).unwrap().lines();
    for zone in zones {
        let ours = steward_daemon::zone::Zone::named(zone).unwrap();
        for at in &instants {
            let local = ours.timestamp_opt(*at, 0).unwrap();
            let line = local.format("%Y-%m-%dT%H:%M:%S%z %Z").to_string();
            assert_eq!(Some(line.as_str()), expected.next(), "{zone} at {at}");
        }
    }
}

const CRONITER_NEXT_IN_ZONE: &str = r#"
import sys, json, datetime, zoneinfo
from croniter import croniter
zone = zoneinfo.ZoneInfo(sys.argv[2])
start = datetime.datetime.fromisoformat(sys.argv[1]).astimezone(zone)
out = {}
for expr in sys.stdin.read().splitlines():
    it = croniter(expr, start)
    runs = [it.get_next(datetime.datetime) for _ in range(12)]
    out[expr] = [r.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") for r in runs]
print(json.dumps(out))
"#;

#[cfg_attr(
    not(interop_croniter),
    ignore = "needs PyPI croniter in the interop venv (scripts/interop-venv.sh)"
)]
#[test]
fn the_next_runs_in_a_zone_with_summer_time_agree_with_croniter() {
    // Times of day that every day has, so that the two agree by definition across the
    // changes (what each does with a time the change skips or repeats is its own policy).
    let expressions = ["0 9 * * *", "30 18 * * 1-5", "0 12 L * *", "15 6 1 * *"];
    let start = "2027-03-20T00:00:00+00:00";
    for zone_name in ["Europe/Berlin", "America/New_York", "Australia/Sydney"] {
        let dir = tempfile::tempdir().unwrap();
        let expected: Value = serde_json::from_slice(&run_python(
            dir.path(),
            CRONITER_NEXT_IN_ZONE,
            &[start, zone_name],
            expressions.join("\n").as_bytes(),
        ))
        .unwrap();
        let zone = steward_daemon::zone::Zone::named(zone_name).unwrap();
        let at = chrono::DateTime::parse_from_rfc3339(start)
            .unwrap()
            .with_timezone(&chrono::Utc);
        for expr in expressions {
            let schedule =
                steward_daemon::channels::timer::schedule::parse_schedule(expr, at, zone).unwrap();
            let ours: Vec<String> = schedule
                .between(at, at + chrono::Duration::days(4000), zone, 12)
                .iter()
                .map(|t| t.naive_utc().format("%Y-%m-%dT%H:%M:%S").to_string())
                .collect();
            let theirs: Vec<String> = expected[expr]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_owned())
                .collect();
            assert_eq!(ours, theirs, "{expr} in {zone_name}");
        }
    }
}

/// An MCP server on the official SDK (`MCPServer`, FastMCP before 2.0, over stdio) offering two tools whose names
/// meet under Steward's mapping.
const COLLIDING_SERVER: &str = r#"
try:
    from mcp.server.mcpserver import MCPServer  # mcp 2.x
except ImportError:
    from mcp.server.fastmcp import FastMCP as MCPServer  # mcp 1.x
server = MCPServer("math")

@server.tool(name="math.mul")
def mul_dotted(a: int, b: int) -> str:
    """Multiply two numbers (dotted name)."""
    return "dotted %d" % (a * b)

@server.tool(name="math_mul")
def mul_plain(a: int, b: int) -> str:
    """Multiply two numbers (plain name)."""
    return "plain %d" % (a * b)

server.run("stdio")
"#;

fn tool_call(daemon: &TestDaemon, tool: &str, args: &str) -> Value {
    let output = daemon.cli(&["tools", "call", tool, "--args", args, "--json"]);
    serde_json::from_str(stdout(&output).trim()).unwrap_or_else(|e| panic!("{e}: {output:?}"))
}

fn tool_names(daemon: &TestDaemon) -> Vec<String> {
    stdout(&daemon.cli(&["tools", "list", "--json"]))
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

async fn wait_for_tools(daemon: &TestDaemon, prefix: &str, n: usize) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let names: Vec<String> = tool_names(daemon)
            .into_iter()
            .filter(|n| n.starts_with(prefix))
            .collect();
        if names.len() >= n {
            return names;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "tools so far: {names:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[cfg_attr(
    not(interop_mcp),
    ignore = "needs PyPI mcp in the interop venv (scripts/interop-venv.sh)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sdk_server_with_names_that_meet_after_mapping_keeps_both_tools() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("math_server.py");
    std::fs::write(&script, COLLIDING_SERVER).unwrap();
    let daemon = TestDaemon::start_with(&format!(
        "[[mcp.servers]]\nname = \"calc\"\ncommand = {:?}\nargs = [{:?}]\nread_only_tools = [\"math.mul\", \"math_mul\"]\n",
        python().display().to_string(),
        script.display().to_string()
    ));
    let names = wait_for_tools(&daemon, "calc_", 2).await;
    assert!(names.contains(&"calc_math_mul".to_owned()), "{names:?}");
    let hashed = names
        .iter()
        .find(|n| n.starts_with("calc_math_mul_"))
        .unwrap_or_else(|| panic!("the dotted tool was dropped: {names:?}"));
    let plain = tool_call(&daemon, "calc_math_mul", r#"{"a": 6, "b": 7}"#);
    assert!(plain.to_string().contains("plain 42"), "{plain}");
    let dotted = tool_call(&daemon, hashed, r#"{"a": 6, "b": 7}"#);
    assert!(dotted.to_string().contains("dotted 42"), "{dotted}");
}

#[cfg_attr(
    not(interop_mcp_server_time),
    ignore = "needs PyPI mcp-server-time in the interop venv (scripts/interop-venv.sh)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_time_server_answers_through_the_pipeline() {
    let daemon = TestDaemon::start_with(&format!(
        "[[mcp.servers]]\nname = \"time\"\ncommand = {:?}\nargs = [\"-m\", \"mcp_server_time\", \"--local-timezone\", \"UTC\"]\nread_only_tools = [\"get_current_time\", \"convert_time\"]\n",
        python().display().to_string()
    ));
    let names = wait_for_tools(&daemon, "time_", 2).await;
    assert!(
        names.contains(&"time_get_current_time".to_owned()),
        "{names:?}"
    );
    let now = tool_call(
        &daemon,
        "time_get_current_time",
        r#"{"timezone": "Europe/Berlin"}"#,
    );
    assert_eq!(now["outcome"], "ok", "{now}");
    assert!(now.to_string().contains("Europe/Berlin"), "{now}");
    let converted = tool_call(
        &daemon,
        "time_convert_time",
        r#"{"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}"#,
    );
    assert!(converted.to_string().contains("21:00"), "{converted}");
}

#[cfg_attr(
    not(interop_mcp_server_git),
    ignore = "needs PyPI mcp-server-git in the interop venv (scripts/interop-venv.sh)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_git_server_reads_a_repository() {
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .arg("-C")
            .arg(repo.path())
            .args([
                "-c",
                "user.name=Owner",
                "-c",
                "user.email=owner@example.test",
            ])
            .args(args)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.path().join("notes.md"), "first\n").unwrap();
    git(&["add", "notes.md"]);
    git(&["commit", "-q", "-m", "Grüße: the first note"]);
    std::fs::write(repo.path().join("draft.md"), "untracked\n").unwrap();
    let path = repo.path().display().to_string();
    let daemon = TestDaemon::start_with(&format!(
        "[[mcp.servers]]\nname = \"git\"\ncommand = {:?}\nargs = [\"-m\", \"mcp_server_git\", \"--repository\", {path:?}]\nread_only_tools = [\"git_status\", \"git_log\"]\n",
        python().display().to_string()
    ));
    let names = wait_for_tools(&daemon, "git_git_", 2).await;
    assert!(names.contains(&"git_git_status".to_owned()), "{names:?}");
    let args = serde_json::json!({ "repo_path": path }).to_string();
    let status = tool_call(&daemon, "git_git_status", &args);
    assert_eq!(status["outcome"], "ok", "{status}");
    assert!(status.to_string().contains("draft.md"), "{status}");
    let log = tool_call(&daemon, "git_git_log", &args);
    assert!(log.to_string().contains("Grüße: the first note"), "{log}");
}

/// The LiteLLM proxy with mock models in front of both of Steward's providers. Its
/// Anthropic route answers a streaming request with one complete JSON message (what made
/// Steward defer the step for ever); its OpenAI route streams.
struct LiteLlm {
    child: Child,
    port: u16,
}

const LITELLM_KEY: &str = "sk-steward-interop-0123456789abcdef0123456789abcdef";

impl LiteLlm {
    async fn start(dir: &Path) -> Self {
        let config = dir.join("litellm.yaml");
        std::fs::write(
            &config,
            "model_list:\n  - model_name: claude-mock\n    litellm_params:\n      model: anthropic/claude-3-5-sonnet-20241022\n      api_key: sk-fake\n      mock_response: \"Hello from the Anthropic mock.\"\n  - model_name: gpt-mock\n    litellm_params:\n      model: openai/gpt-4o\n      api_key: sk-fake\n      mock_response: \"Hello from the OpenAI mock.\"\n",
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let litellm = python().with_file_name("litellm");
        let child = Command::new(litellm)
            .arg("--config")
            .arg(&config)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .env("LITELLM_MASTER_KEY", LITELLM_KEY)
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("litellm.log")).unwrap())
            .spawn()
            .unwrap();
        let proxy = Self { child, port };
        let client = reqwest::Client::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        loop {
            let up = client
                .get(format!("http://127.0.0.1:{port}/health/liveliness"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if up {
                return proxy;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the LiteLLM proxy did not start: {}",
                std::fs::read_to_string(dir.join("litellm.log")).unwrap_or_default()
            );
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
    }
}

impl Drop for LiteLlm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg_attr(
    not(interop_litellm),
    ignore = "needs PyPI litellm[proxy] in the interop venv (scripts/interop-venv.sh)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_providers_answer_through_the_litellm_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let proxy = LiteLlm::start(dir.path()).await;
    for (provider, model, expected) in [
        ("anthropic", "claude-mock", "Hello from the Anthropic mock."),
        ("openai", "gpt-mock", "Hello from the OpenAI mock."),
    ] {
        let daemon = TestDaemon::start_with_env(
            &format!(
                "[model]\nprovider = \"{provider}\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"{model}\"\napi_key_env = \"STEWARD_TEST_LITELLM_KEY\"\ntimeout_secs = 30\n",
                proxy.port
            ),
            &[("STEWARD_TEST_LITELLM_KEY", LITELLM_KEY)],
        );
        let output = daemon.cli(&["send", "--wait", "--timeout", "60", "hello?"]);
        assert!(output.status.success(), "{provider}: {output:?}");
        assert_eq!(stdout(&output).trim(), expected, "{provider}");
    }
}

/// GitHub's signer (`@octokit/webhooks-methods`, what GitHub's own libraries use) run by
/// node over `body`.
fn octokit_sign(secret: &str, body: &str) -> String {
    let npm = PathBuf::from(env!("STEWARD_INTEROP_VENV")).join("npm");
    let mut child = Command::new("node")
        .current_dir(&npm)
        .args([
            "--input-type=module",
            "-e",
            "import { sign } from '@octokit/webhooks-methods'; const chunks = []; for await (const c of process.stdin) chunks.push(c); process.stdout.write(await sign(process.argv[1], Buffer.concat(chunks).toString()));",
            secret,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[cfg_attr(
    not(interop_octokit_webhooks_methods),
    ignore = "needs npm @octokit/webhooks-methods in the interop venv (scripts/interop-venv.sh)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn githubs_signer_is_accepted_for_json_and_form_deliveries() {
    let secret = "It's a Secret to Everybody";
    let daemon = TestDaemon::start_with_env(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[[webhook.routes]]\nname = \"gh\"\nauth = \"github\"\nsecret_env = \"T_GH\"\ntext = \"{header.x-github-event} on {body.repository.full_name}: {body.action}\"\n",
        &[("T_GH", secret)],
    );
    let client = reqwest::Client::new();
    let base = base(&daemon);
    let json =
        r#"{"action":"opened","repository":{"full_name":"me/steward"},"issue":{"title":"Grüße"}}"#;
    let form: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &json.replace("opened", "closed"))
        .finish();
    let post = |delivery: &str, content_type: &str, body: String, signature: String| {
        client
            .post(format!("{base}/hooks/gh"))
            .header("X-Hub-Signature-256", signature)
            .header("X-GitHub-Delivery", delivery)
            .header("X-GitHub-Event", "issues")
            .header("Content-Type", content_type)
            .body(body)
            .send()
    };
    let response = post(
        "d-json",
        "application/json",
        json.into(),
        octokit_sign(secret, json),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), 202);
    let response = post(
        "d-form",
        "application/x-www-form-urlencoded",
        form.clone(),
        octokit_sign(secret, &form),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), 202);
    let forged = post(
        "d-forged",
        "application/json",
        json.replace("me/steward", "evil/steward"),
        octokit_sign(secret, json),
    )
    .await
    .unwrap();
    assert_eq!(forged.status(), 401);

    let events = daemon.events_on("webhook:", 2).await;
    let texts: Vec<&str> = events.iter().map(|e| e.text.as_str()).collect();
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("issues on me/steward: opened")),
        "{texts:#?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("issues on me/steward: closed")),
        "{texts:#?}"
    );
    assert!(texts.iter().all(|t| !t.contains("%7B")), "{texts:#?}");
}
