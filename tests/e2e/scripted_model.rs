//! A scripted model server: the n-th request gets the n-th raw HTTP response, written in
//! small pieces so that streams split at awkward places. Each protocol's test module builds
//! the responses in its provider's documented wire format; this one only serves and records.

use std::io::Write;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::support::HttpRequest;

pub struct ScriptedModel {
    pub port: u16,
    requests: Arc<Mutex<Vec<HttpRequest>>>,
}

impl ScriptedModel {
    /// Answers the n-th request with `scripts[n]`, written in `piece`-byte writes, then
    /// closes the connection. `<<PAUSE>>` in a script holds the stream for 30 s.
    pub fn start(scripts: Vec<String>, piece: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests: Arc<Mutex<Vec<HttpRequest>>> = Arc::default();
        let log = requests.clone();
        std::thread::spawn(move || {
            let mut scripts = scripts.into_iter();
            for stream in listener.incoming().flatten() {
                // One thread per connection: a slow stream must not hold up the next request.
                let log = log.clone();
                let script = scripts.next();
                std::thread::spawn(move || serve(stream, script, piece, &log));
            }
        });
        Self { port, requests }
    }

    /// Like [`Self::start`] with several queues of answers: each request is answered from
    /// the queue `route` picks by its body (two conversations at once, in any order).
    pub fn start_routed(route: fn(&str) -> usize, queues: Vec<Vec<String>>, piece: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests: Arc<Mutex<Vec<HttpRequest>>> = Arc::default();
        let log = requests.clone();
        let queues: Arc<Mutex<Vec<std::collections::VecDeque<String>>>> =
            Arc::new(Mutex::new(queues.into_iter().map(Into::into).collect()));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (log, queues) = (log.clone(), queues.clone());
                std::thread::spawn(move || {
                    let request = HttpRequest::read(&stream);
                    let queue = route(&String::from_utf8_lossy(&request.body));
                    let script = queues.lock().unwrap()[queue].pop_front();
                    assert!(script.is_some(), "queue {queue} has no answer left");
                    log.lock().unwrap().push(request);
                    write_script(stream, script, piece);
                });
            }
        });
        Self { port, requests }
    }

    /// The JSON bodies received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect()
    }

    /// The raw bodies received so far, for byte-level comparisons.
    pub fn raw_bodies(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .map(|r| String::from_utf8(r.body.clone()).unwrap())
            .collect()
    }

    /// (path, header) of the n-th request.
    pub fn header(&self, n: usize, name: &str) -> (String, Option<String>) {
        let requests = self.requests.lock().unwrap();
        let request = &requests[n];
        (
            request.path.clone(),
            request.header(name).map(str::to_owned),
        )
    }

    pub fn wait_for_requests(&self, n: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while self.requests.lock().unwrap().len() < n {
            assert!(
                std::time::Instant::now() < deadline,
                "only {} requests arrived",
                self.requests.lock().unwrap().len()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A 200 response streaming `events`.
pub fn sse(events: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n{events}"
    )
}

/// A 200 response whose body is one complete JSON message (a server that ignores
/// `"stream": true`).
pub fn json_message(body: &Value) -> String {
    let body = body.to_string();
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn serve(
    stream: std::net::TcpStream,
    script: Option<String>,
    piece: usize,
    log: &Mutex<Vec<HttpRequest>>,
) {
    let request = HttpRequest::read(&stream);
    log.lock().unwrap().push(request);
    write_script(stream, script, piece);
}

fn write_script(stream: std::net::TcpStream, script: Option<String>, piece: usize) {
    let script = script.expect("a script for every request");
    let mut stream = stream;
    for (i, section) in script.split("<<PAUSE>>").enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_secs(30));
        }
        for part in section.as_bytes().chunks(piece) {
            if stream
                .write_all(part)
                .and_then(|()| stream.flush())
                .is_err()
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
