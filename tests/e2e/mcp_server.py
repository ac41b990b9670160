"""A small MCP server for Steward's end-to-end tests (Python standard library only).

Speaks JSON-RPC 2.0 as the MCP specification (revision 2025-06-18) describes, over stdio
(newline-delimited messages) or, with `--http PORT_FILE`, over streamable HTTP on
127.0.0.1 (the chosen port is written to PORT_FILE; answers are plain JSON; a session id
is issued at initialize and required afterwards; GET has no notification stream: 405).

Tools:
  lookup {word}    read-only: returns a definition
  add_note {text}  appends the text to $NOTES_FILE (a write the test can count)
  fail {}          answers with isError
  grow {}          adds the tool `extra_tool` and sends notifications/tools/list_changed
  crash {}         exits at once (the client must restart the server)
Every start appends a line to $STARTS_FILE when it is set.
"""

import json
import os
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOOLS = [
    {
        "name": "lookup",
        "title": "Dictionary lookup",
        "description": "Look up the definition of an English word in the dictionary.",
        "inputSchema": {
            "type": "object",
            "properties": {"word": {"type": "string", "description": "The word to define"}},
            "required": ["word"],
        },
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "add_note",
        "description": "Append a line of text to the notes file.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": False,
        },
        # A hint that lies: the client must not trust it.
        "annotations": {"readOnlyHint": True, "destructiveHint": False},
    },
    {"name": "fail", "description": "Always fails.", "inputSchema": {"type": "object"}},
    {"name": "grow", "description": "Adds a tool.", "inputSchema": {"type": "object"}},
    {"name": "crash", "description": "Exits the server.", "inputSchema": {"type": "object"}},
]
EXTRA = {
    "name": "extra_tool",
    "description": "A tool that appeared later: converts temperatures.",
    "inputSchema": {"type": "object"},
}


def text(value):
    return {"content": [{"type": "text", "text": value}], "isError": False}


def call_tool(name, args, notify):
    if name == "lookup":
        return text(f"definition of {args.get('word', '?')}: a word")
    if name == "add_note":
        with open(os.environ["NOTES_FILE"], "a", encoding="utf-8") as notes:
            notes.write(args["text"] + "\n")
        return text("saved")
    if name == "fail":
        return {"content": [{"type": "text", "text": "it failed"}], "isError": True}
    if name == "grow":
        if EXTRA not in TOOLS:
            TOOLS.append(EXTRA)
        notify({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        return text("grown")
    if name == "crash":
        os._exit(3)
    if name == "extra_tool":
        return text("converted")
    return None


def handle(message, notify):
    """The answer to one message, or None for notifications."""
    method = message.get("method")
    if "id" not in message:
        return None
    rid = message["id"]
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "steward-test-server", "version": "1.0"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        params = message["params"]
        result = call_tool(params["name"], params.get("arguments") or {}, notify)
        if result is None:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "unknown tool"}}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "method not found"}}
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def serve_stdio():
    def send(message):
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        answer = handle(json.loads(line), send)
        if answer is not None:
            send(answer)


def serve_http(port_file):
    sessions = set()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            message = json.loads(body)
            session = self.headers.get("Mcp-Session-Id")
            if message.get("method") != "initialize" and session not in sessions:
                self.send_response(400)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            answer = handle(message, lambda _notification: None)
            if answer is None:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            payload = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            if message.get("method") == "initialize":
                new = uuid.uuid4().hex
                sessions.add(new)
                self.send_header("Mcp-Session-Id", new)
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(port_file, "w", encoding="utf-8") as out:
        out.write(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    if os.environ.get("STARTS_FILE"):
        with open(os.environ["STARTS_FILE"], "a", encoding="utf-8") as starts:
            starts.write("start\n")
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        serve_http(sys.argv[2])
    else:
        serve_stdio()
