//! Brain benchmarks (targets from the brain issue; figures, not assertions), on the real
//! `steward` binary talking to a local model server that speaks OpenAI's streaming protocol,
//! answers at once and keeps connections open (as providers do), so that what is measured
//! is Steward's own time:
//! - event in → request written: the owner's message sent on the socket until the model
//!   server has read the whole first request (includes the durable inbox write);
//! - response complete → next request written: the server's last byte of a tool-call answer
//!   until it has read the next request (includes running the tool and recording it). The
//!   server answers after 20 ms, like the fastest real model, so that the flush Steward
//!   runs during the model call is not counted as if it were on the path;
//! - model calls and input per scheduled run: after a main conversation of 20 turns, a cron
//!   job triggered 10 times; each run should cost one call whose input is the job, its
//!   thread and a summary — not the main history (request bytes, and ~tokens at 4 bytes
//!   each, next to a main-conversation request);
//! - peak RSS (VmHWM) of the daemon during one 50-call turn with 20 KB tool results, with the
//!   default 32k context (compaction runs) and with a 1M-token window (no compaction: the
//!   whole megabyte of history is rendered for every call).
//!
//! Run: `cargo bench -p steward-daemon --bench brain` (add `-- quick` for a short run).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use steward_protocol::client::Client;
use steward_protocol::{Request, Response};
use tokio::time::Instant;

mod support;
use support::{cpu_time, model, ms, percentile, spawn_daemon, status_mb};

/// What the model does: `calls_left` more tool calls (one per response), then a text. The
/// driver sets `calls_left` before each turn; compaction calls are answered with a summary.
struct Plan {
    calls_left: usize,
    tool: &'static str,
    /// The arguments of the call made with `calls_left` calls left. Steward ends a turn
    /// when the same call comes a third time, so a long turn must vary them.
    args: fn(usize) -> Value,
    /// How long the model "thinks" before answering. Steward overlaps durable writes with
    /// the model call (a step's merge is flushed while the model works); a model that
    /// answers in microseconds would put that fsync back on the measured path, which no
    /// real model does.
    latency: Duration,
}

#[derive(Default)]
struct Timeline {
    /// When each request had been read completely.
    received: Vec<Instant>,
    /// When each tool-call answer had been written completely (None for text answers).
    answered: Vec<Option<Instant>>,
    /// The size of each request's JSON, in bytes.
    sizes: Vec<usize>,
}

struct ModelServer {
    port: u16,
    timeline: Arc<Mutex<Timeline>>,
    plan: Arc<Mutex<Plan>>,
}

impl ModelServer {
    fn start(plan: Plan) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let timeline: Arc<Mutex<Timeline>> = Arc::default();
        let plan = Arc::new(Mutex::new(plan));
        let (log, current) = (timeline.clone(), plan.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (log, current) = (log.clone(), current.clone());
                std::thread::spawn(move || serve(stream, &log, &current));
            }
        });
        Self {
            port,
            timeline,
            plan,
        }
    }
}

/// Answers the requests of one connection (see [`model`]) until the daemon closes it.
fn serve(stream: TcpStream, log: &Mutex<Timeline>, plan: &Mutex<Plan>) {
    while let Some((request, received)) = model::read_request_at(&stream) {
        answer(&stream, request, received, log, plan);
    }
}

/// Answers one request as the plan says, and logs when it came and when it was answered.
fn answer(
    stream: &TcpStream,
    request: Value,
    received: Instant,
    log: &Mutex<Timeline>,
    plan: &Mutex<Plan>,
) {
    let size = request.to_string().len();
    let summarizing = model::is_summary_request(&request);
    let latency = plan.lock().unwrap().latency;
    std::thread::sleep(latency);
    let call = {
        let mut plan = plan.lock().unwrap();
        (!summarizing && plan.calls_left > 0).then(|| {
            plan.calls_left -= 1;
            (plan.tool, (plan.args)(plan.calls_left))
        })
    };
    let (events, is_call) = match call {
        Some((tool, args)) => (model::tool_call(tool, &args), true),
        None if summarizing => (
            model::text("Summary: the owner asked for files to be read; they were."),
            false,
        ),
        None => (model::text("Done."), false),
    };
    model::respond(stream, &events).unwrap();
    let answered = Instant::now();
    let mut log = log.lock().unwrap();
    log.received.push(received);
    log.answered.push(is_call.then_some(answered));
    log.sizes.push(size);
}

struct Daemon {
    child: Child,
    dir: tempfile::TempDir,
}

impl Daemon {
    fn start(model_port: u16, extra_config: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = format!(
            "[model]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:{model_port}/v1\"\nmodel = \"bench\"\n{extra_config}"
        );
        let (child, _) = spawn_daemon(dir.path(), &config, &[]);
        Self { child, dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Sends a message and waits for its step to end; returns when it was written and when
    /// the daemon acknowledged it (durable in the inbox).
    async fn turn(&self, text: &str) -> (Instant, Instant) {
        let mut client = Client::connect(&self.path().join("steward.sock"))
            .await
            .unwrap();
        let sent = Instant::now();
        client
            .request(&Request::Send {
                text: text.into(),
                urgency: None,
                wait: true,
            })
            .await
            .unwrap();
        let mut accepted = sent;
        loop {
            match client.next().await.unwrap() {
                None | Some(Response::End) => return (sent, accepted),
                Some(Response::Accepted { .. }) => accepted = Instant::now(),
                Some(Response::Error { message }) => panic!("{message}"),
                Some(_) => {}
            }
        }
    }

    fn status_mb(&self, field: &str) -> f64 {
        status_mb(self.child.id(), field)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Steward's own time per model call, over `turns` turns of one `echo` call each; and the
/// daemon's CPU time per model request over the whole run.
async fn own_time(turns: usize) -> OwnTime {
    let server = ModelServer::start(Plan {
        calls_left: 0,
        tool: "echo",
        args: |_| json!({"text": "hello"}),
        latency: Duration::from_millis(20),
    });
    let daemon = Daemon::start(server.port, "");
    let mut to_first_request = Vec::new();
    let mut from_durable = Vec::new();
    let mut between_calls = Vec::new();
    let cpu_before = cpu_time(daemon.child.id());
    for i in 0..turns {
        let before = server.timeline.lock().unwrap().received.len();
        server.plan.lock().unwrap().calls_left = 1;
        let (sent, accepted) = daemon.turn(&format!("turn {i}")).await;
        let timeline = server.timeline.lock().unwrap();
        to_first_request.push(timeline.received[before] - sent);
        // The acknowledgement may arrive after the request did: then it took no time.
        from_durable.push(timeline.received[before].saturating_duration_since(accepted));
        for k in before..timeline.received.len() - 1 {
            if let Some(answered) = timeline.answered[k] {
                between_calls.push(timeline.received[k + 1] - answered);
            }
        }
    }
    let requests = server.timeline.lock().unwrap().received.len() as u32;
    let cpu = (cpu_time(daemon.child.id()) - cpu_before) / requests.max(1);
    to_first_request.sort();
    from_durable.sort();
    between_calls.sort();
    OwnTime {
        to_first_request,
        from_durable,
        between_calls,
        cpu,
    }
}

/// Sorted latencies of [`own_time`], and the daemon's CPU time per model request.
struct OwnTime {
    to_first_request: Vec<Duration>,
    from_durable: Vec<Duration>,
    between_calls: Vec<Duration>,
    cpu: Duration,
}

/// Model requests and their sizes for `runs` runs of a cron job after `history` owner
/// turns: (requests per run, mean bytes per run's request, bytes of the last main request).
async fn scheduled_runs(history: usize, runs: usize) -> (f64, f64, usize) {
    let server = ModelServer::start(Plan {
        calls_left: 0,
        tool: "echo",
        args: |_| json!({"text": "hello"}),
        latency: Duration::ZERO,
    });
    let daemon = Daemon::start(
        server.port,
        "\n[[cron]]\nname = \"water\"\nschedule = \"every 24h\"\ntext = \"Remind the owner to water the plants.\"\n",
    );
    let filler = "the owner talks about plans for the week, the garden and the books to read; ";
    for i in 0..history {
        daemon
            .turn(&format!("turn {i}: {}", filler.repeat(8)))
            .await;
    }
    let main_request = *server.timeline.lock().unwrap().sizes.last().unwrap();
    let before = server.timeline.lock().unwrap().received.len();
    let socket = daemon.path().join("steward.sock");
    for _ in 0..runs {
        let seen = server.timeline.lock().unwrap().received.len();
        let trigger = Request::Cron {
            command: steward_protocol::CronCommand::Trigger {
                name: "water".into(),
            },
        };
        Client::call(&socket, &trigger).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.timeline.lock().unwrap().received.len() == seen {
            assert!(Instant::now() < deadline, "the run made no model call");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Room for a second call, if a run made one.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let timeline = server.timeline.lock().unwrap();
    let run_sizes = &timeline.sizes[before..];
    (
        run_sizes.len() as f64 / runs as f64,
        run_sizes.iter().sum::<usize>() as f64 / run_sizes.len().max(1) as f64,
        main_request,
    )
}

/// Peak RSS during one turn of `calls` calls to `fs_read` of a 20 KB file (17–20 KB each).
async fn peak_rss(calls: usize, extra_config: &str) -> (f64, f64, usize, Duration) {
    let server = ModelServer::start(Plan {
        calls_left: 0,
        tool: "fs_read",
        // Each call starts one line further (the file has 315 lines), so that every result
        // is new to the loop guard: 17 to 20 KB each.
        args: |left| json!({"path": "big.txt", "offset": 1 + left}),
        latency: Duration::ZERO,
    });
    let config = format!(
        "{extra_config}\n[dispatcher]\nmax_steps_per_turn = {}\n",
        calls + 5
    );
    let daemon = Daemon::start(server.port, &config);
    let line = "0123456789 the quick brown fox jumps over the lazy dog 0123456789\n";
    std::fs::write(
        daemon.path().join("workspace/big.txt"),
        line.repeat(20 * 1024 / line.len()),
    )
    .unwrap();
    // Warm up: one short turn so that start-up allocations are not counted as the turn's.
    let _ = daemon.turn("hello").await;
    let before = daemon.status_mb("VmRSS:");
    server.plan.lock().unwrap().calls_left = calls;
    let started = Instant::now();
    let _ = daemon.turn("read big.txt again and again").await;
    let took = started.elapsed();
    let requests = server.timeline.lock().unwrap().received.len() - 1;
    assert_eq!(
        server.plan.lock().unwrap().calls_left,
        0,
        "every call was made"
    );
    (before, daemon.status_mb("VmHWM:"), requests, took)
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let turns = if quick { 50 } else { 500 };
    let own = runtime.block_on(own_time(turns));
    println!(
        "own time per model call ({turns} turns of message -> echo call -> answer): event in -> request read by the model p50 {} p99 {} (from the durable acknowledgement: p50 {} p99 {}); tool-call answer complete -> next request read p50 {} p99 {}; daemon CPU per model request {}",
        ms(percentile(&own.to_first_request, 0.5)),
        ms(percentile(&own.to_first_request, 0.99)),
        ms(percentile(&own.from_durable, 0.5)),
        ms(percentile(&own.from_durable, 0.99)),
        ms(percentile(&own.between_calls, 0.5)),
        ms(percentile(&own.between_calls, 0.99)),
        ms(own.cpu),
    );

    let (calls, bytes, main) = runtime.block_on(scheduled_runs(20, 10));
    println!(
        "scheduled runs (10 triggers of a cron job after 20 owner turns): {calls:.2} model calls per run; input per call {:.1} KB (~{:.0} tokens) against {:.1} KB (~{:.0} tokens) for a request of the main conversation",
        bytes / 1024.0,
        bytes / 4.0,
        main as f64 / 1024.0,
        main as f64 / 4.0
    );

    for (label, config) in [
        ("default 32k-token window, compaction on", ""),
        (
            "1M-token window, no compaction",
            "context_window_tokens = 1000000",
        ),
    ] {
        let (before, peak, requests, took) = runtime.block_on(peak_rss(50, config));
        println!(
            "50-call turn with 20 KB results ({label}): {requests} model requests in {:.2}s; RSS before {before:.1} MB, peak (VmHWM) {peak:.1} MB",
            took.as_secs_f64()
        );
    }
}
