//! End-to-end tests: the real `steward` binary, a real control socket, temp data dirs.
#![allow(clippy::disallowed_types)] // deadlines on real processes are wall-clock time
#![allow(clippy::unwrap_used)] // helpers of tests: a panic is the failure report

mod cli;
mod confirm;
mod delivery;
mod files;
mod http;
mod model;
mod shell;
mod steps;
mod support;

/// A local HTTP server that answers 200 and counts requests: (port, count).
fn http_recorder_port() -> (u16, impl Fn() -> usize) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut stream = stream;
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    (port, move || {
        count.load(std::sync::atomic::Ordering::SeqCst)
    })
}
