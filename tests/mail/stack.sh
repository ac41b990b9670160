#!/usr/bin/env bash
# A real mail stack on loopback for the email tests: Dovecot (IMAP with IDLE, LMTP,
# authenticated submission) and OpenSMTPD (plain SMTP that delivers into Dovecot by LMTP).
#
#   tests/mail/stack.sh start    # idempotent: does nothing when the stack already answers
#   tests/mail/stack.sh stop
#   tests/mail/stack.sh status   # exit 0 when both servers answer
#
# Every mailbox exists on first use: any user name logs in with the password `secret` (a
# static passdb), so each test takes its own addresses and tests never share a mailbox.
# Ports (127.0.0.1 only): IMAP 10143 (STARTTLS) and 10993 (implicit TLS), LMTP 10024,
# submission 10587 (STARTTLS) and 10465 (implicit TLS), OpenSMTPD 10025.
# The certificate (CN localhost, SAN 127.0.0.1) is $STACK_DIR/cert.pem: trust it as `ca_file`.
set -euo pipefail

STACK_DIR=${STEWARD_MAIL_STACK_DIR:-/tmp/steward-mail-stack}

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

status() { answers 10143 && answers 10025; }

start() {
    # Test processes start the stack concurrently: one starts it, the others wait.
    # The servers below must not inherit fd 9: a daemon holding the lock would make every
    # later `start` wait for ever.
    exec 9>"${STACK_DIR}.lock"
    flock -w 120 9 || {
        echo "waited 120 s for ${STACK_DIR}.lock" >&2
        exit 1
    }
    if status; then return 0; fi
    for bin in dovecot smtpd openssl; do
        command -v "$bin" >/dev/null || {
            echo "missing $bin: apt-get install -y dovecot-imapd dovecot-lmtpd dovecot-submissiond opensmtpd openssl" >&2
            exit 1
        }
    done
    stop_quietly
    rm -rf "$STACK_DIR"
    mkdir -p "$STACK_DIR/run" "$STACK_DIR/state" "$STACK_DIR/home"
    chown 65534:65534 "$STACK_DIR/home"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=localhost \
        -keyout "$STACK_DIR/key.pem" -out "$STACK_DIR/cert.pem" \
        -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
        -addext "basicConstraints=critical,CA:FALSE" \
        -addext "extendedKeyUsage=serverAuth" 2>/dev/null
    cat >"$STACK_DIR/dovecot.conf" <<CONF
instance_name = steward-test
base_dir = $STACK_DIR/run
state_dir = $STACK_DIR/state
log_path = $STACK_DIR/dovecot.log
listen = 127.0.0.1
protocols = imap lmtp submission
default_internal_user = dovecot
default_login_user = dovenull
ssl = yes
ssl_cert = <$STACK_DIR/cert.pem
ssl_key = <$STACK_DIR/key.pem
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_failure_delay = 0
hostname = localhost
passdb {
  driver = static
  args = password=secret
}
userdb {
  driver = static
  args = uid=65534 gid=65534 home=$STACK_DIR/home/%u
}
mail_location = maildir:~/Maildir
namespace inbox {
  inbox = yes
  mailbox Sent {
    special_use = \Sent
    auto = create
  }
}
protocol imap {
  mail_max_userip_connections = 200
}
service imap-login {
  inet_listener imap {
    port = 10143
  }
  inet_listener imaps {
    port = 10993
    ssl = yes
  }
}
service lmtp {
  inet_listener lmtp {
    address = 127.0.0.1
    port = 10024
  }
}
submission_relay_host = 127.0.0.1
submission_relay_port = 10025
submission_relay_trusted = yes
service submission-login {
  inet_listener submission {
    port = 10587
  }
  inet_listener submissions {
    port = 10465
    ssl = yes
  }
}
CONF
    cat >"$STACK_DIR/smtpd.conf" <<CONF
table vusers { "@" = "nobody" }
listen on 127.0.0.1 port 10025
action "dovecot" lmtp "127.0.0.1:10024" rcpt-to virtual <vusers>
match from any for any action "dovecot"
CONF
    dovecot -c "$STACK_DIR/dovecot.conf" 9>&- </dev/null >"$STACK_DIR/dovecot.start.log" 2>&1 || {
        cat "$STACK_DIR/dovecot.start.log" >&2
        exit 1
    }
    smtpd -d -f "$STACK_DIR/smtpd.conf" 9>&- </dev/null >"$STACK_DIR/smtpd.log" 2>&1 &
    echo $! >"$STACK_DIR/smtpd.pid"
    for _ in $(seq 100); do
        if status; then return 0; fi
        sleep 0.1
    done
    echo "the mail stack did not come up; logs in $STACK_DIR" >&2
    exit 1
}

stop_quietly() {
    if [ -f "$STACK_DIR/run/master.pid" ]; then kill "$(cat "$STACK_DIR/run/master.pid")" 2>/dev/null || true; fi
    if [ -f "$STACK_DIR/smtpd.pid" ]; then kill "$(cat "$STACK_DIR/smtpd.pid")" 2>/dev/null || true; fi
    # Only one OpenSMTPD runs per machine: a leftover one holds the queue.
    pkill -x smtpd 2>/dev/null || true
    for _ in $(seq 50); do
        if ! answers 10143 && ! answers 10025; then return 0; fi
        sleep 0.1
    done
}

case "${1:-}" in
start) start ;;
stop) stop_quietly ;;
status) status ;;
*)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
