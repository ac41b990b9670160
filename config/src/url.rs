//! The base URL of a service the daemon sends a secret to (a Matrix homeserver, a Bot API
//! server): `https://`, or plain `http://` only to a loopback host, so that a password or
//! token never crosses a network in the clear.

fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The URL without its trailing `/`, or why it is not one a secret may be sent to.
pub(crate) fn service_url(url: &str) -> Result<String, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("{url:?} is not a URL (expected https://HOST)"))?;
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => host,
        _ => authority,
    };
    if host.is_empty() {
        return Err(format!("{url:?} names no host"));
    }
    match scheme {
        "https" => {}
        "http" if is_loopback(host) => {}
        "http" => {
            return Err(format!(
                "{url:?}: plain http only to a loopback host; use https"
            ));
        }
        other => return Err(format!("{other:?} is not http or https")),
    }
    Ok(url.trim_end_matches('/').to_owned())
}
