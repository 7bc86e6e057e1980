"""Both request dialects, response envelopes and JSON-RPC style errors."""

import json

import pytest


def test_flat_ping(client):
    client.send_json({"clientRequest": {"id": "7", "ping": {"message": "hi ✓"}}})
    resp = client.recv_response("7")
    assert resp == {"id": "7", "ping": {"message": "hi ✓"}}


def test_quick_reference_ping(client):
    client.send_json({"clientRequest": {"id": "7", "method": {"ping": {"message": "hi ✓"}}}})
    resp = client.recv_response("7")
    assert resp == {"id": "7", "result": {"message": "hi ✓"}}


def test_authenticate_both_dialects(client):
    assert client.request("authenticate", {}, id="a1") == {"id": "a1", "authenticate": {"authenticated": True}}
    assert client.request_qr("authenticate", {}, id="a2") == {"id": "a2", "result": {"authenticated": True}}


def test_response_ids_match_pipelined_requests(client):
    ids = [f"p{i}" for i in range(20)]
    for i in ids:
        client.send_request("ping", {"message": "m-" + i}, id=i)
    for i in reversed(ids):
        resp = client.recv_response(i)
        assert resp == {"id": i, "ping": {"message": "m-" + i}}


def test_mixed_dialects_on_one_connection(client):
    client.send_request_qr("ping", {"message": "q"}, id="q")
    client.send_request("ping", {"message": "f"}, id="f")
    assert client.recv_response("f") == {"id": "f", "ping": {"message": "f"}}
    assert client.recv_response("q") == {"id": "q", "result": {"message": "q"}}


def _error(resp):
    assert set(resp) == {"id", "error"}, resp
    err = resp["error"]
    assert isinstance(err.get("code"), int), resp
    assert isinstance(err.get("message"), str) and err["message"], resp
    return err


@pytest.mark.parametrize("text", ["{not json", "", "{\"clientRequest\": {\"id\": \"1\",", "\u00e9\u00e9", "nul"])
def test_malformed_json_32700_connection_stays_open(client, text):
    client.send_text(text)
    resp = client.recv_response(None)
    assert _error(resp)["code"] == -32700
    assert resp["id"] is None
    client.ping("still open")


@pytest.mark.parametrize("payload", [
    [],
    {"foo": 1},
    42,
    "clientRequest",
    None,
    {"clientRequest": []},
    {"clientRequest": "ping"},
    {"serverResponse": {"id": "1", "ping": {}}},
])
def test_not_a_request_32600(client, payload):
    client.send_json(payload)
    resp = client.recv_response(None)
    assert _error(resp)["code"] == -32600
    client.ping("still open")


def test_request_without_method_32600_keeps_id(client):
    client.send_json({"clientRequest": {"id": "1"}})
    resp = client.recv_response("1")
    assert _error(resp)["code"] == -32600
    client.ping("still open")


def test_unknown_method_flat_32601(client):
    client.send_json({"clientRequest": {"id": "3", "fooBarMethod": {}}})
    resp = client.recv_response("3")
    err = _error(resp)
    assert err["code"] == -32601
    assert "fooBarMethod" in err["message"]
    client.ping("still open")


def test_unknown_method_quick_reference_32601(client):
    client.send_json({"clientRequest": {"id": "4", "method": {"bazQuux": {"x": 1}}}})
    resp = client.recv_response("4")
    err = _error(resp)
    assert err["code"] == -32601
    assert "bazQuux" in err["message"]
    client.ping("still open")


@pytest.mark.parametrize("params", [{}, {"path": 5}, {"path": None}, {"path": ["a"]}, "path", None])
def test_bad_params_readfile_32602(client, params):
    client.send_json({"clientRequest": {"id": "5", "readFile": params}})
    resp = client.recv_response("5")
    assert _error(resp)["code"] == -32602, resp
    client.send_json({"clientRequest": {"id": "6", "method": {"readFile": params}}})
    resp = client.recv_response("6")
    assert _error(resp)["code"] == -32602, resp
    client.ping("still open")


@pytest.mark.parametrize("method,params", [
    ("editFile", {"path": "x.txt"}),
    ("editFile", {"fullContent": "x"}),
    ("editFile", {"path": "x.txt", "start": "0", "end": 1, "newText": "a"}),
    ("openURI", {}),
    ("openURI", {"uri": 3}),
    ("getDiagnostics", {"path": 7}),
])
def test_bad_params_other_methods_32602(client, method, params):
    resp = client.request(method, params, id="bp")
    assert _error(resp)["code"] == -32602, resp
    client.ping("still open")


def test_error_envelope_is_serverresponse(client):
    """The raw frame for an error is {"serverResponse": {"id": ..., "error": ...}}."""
    client.send_text(json.dumps({"clientRequest": {"id": "e1", "noSuchThing": {}}}))
    while True:
        msg = client.recv_message()
        if "serverNotification" in msg:
            continue
        break
    assert list(msg) == ["serverResponse"], msg
    assert msg["serverResponse"]["id"] == "e1"
    assert msg["serverResponse"]["error"]["code"] == -32601

