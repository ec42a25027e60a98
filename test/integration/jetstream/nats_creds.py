#!/usr/bin/env python3
"""Decentralised NATS authorization for the tests, without nsc: an operator,
a system account, an account with JetStream, and users with .creds files,
as nsc would make them (nkeys: ed25519 keys in NATS' base32 form; JWTs signed
"ed25519-nkey").

  nats_creds.py DIR
writes DIR/server.conf.inc (operator, memory resolver, the accounts),
DIR/user.creds (a user of the account), and DIR/stranger.creds (a user
signed by an account the server does not know: refused).

Needs python3-cryptography (installed by .ci/setup).
"""
import base64
import json
import os
import secrets
import sys
import time

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

# nkeys' prefixes (github.com/nats-io/nkeys, strkey.go)
PREFIX_SEED = 18 << 3
PREFIX_OPERATOR = 14 << 3
PREFIX_ACCOUNT = 0
PREFIX_USER = 20 << 3


def crc16(data):  # CRC-16/XMODEM, as nkeys' crc16.go
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def encode(prefix_bytes, raw):
    data = bytes(prefix_bytes) + raw
    return base64.b32encode(data + crc16(data).to_bytes(2, "little")).decode().rstrip("=")


class Key:
    def __init__(self, prefix):
        self.priv = Ed25519PrivateKey.generate()
        raw_seed = self.priv.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                           serialization.NoEncryption())
        raw_pub = self.priv.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.public = encode([prefix], raw_pub)
        self.seed = encode([PREFIX_SEED | (prefix >> 5), (prefix & 31) << 3], raw_seed)


def b64(data):
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def jwt(issuer, subject, name, nats):
    claims = {"jti": base64.b32encode(secrets.token_bytes(32)).decode().rstrip("="), "iat": int(time.time()),
              "iss": issuer.public, "name": name, "sub": subject.public, "nats": nats}
    head = b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = b64(json.dumps(claims).encode())
    sig = issuer.priv.sign((head + "." + body).encode())
    return head + "." + body + "." + b64(sig)


UNLIMITED = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True, "conn": -1,
             "leaf": -1}


def account(operator, key, name, jetstream):
    limits = dict(UNLIMITED)
    if jetstream:
        limits.update({"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1})
    return jwt(operator, key, name, {"limits": limits, "default_permissions": {"pub": {}, "sub": {}},
                                     "type": "account", "version": 2})


def creds(account_key, name):
    user = Key(PREFIX_USER)
    token = jwt(account_key, user, name, {"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
                                          "type": "user", "version": 2})
    return ("-----BEGIN NATS USER JWT-----\n%s\n------END NATS USER JWT------\n\n"
            "************************* IMPORTANT *************************\n"
            "NKEY Seed printed below can be used to sign and prove identity.\n"
            "NKEYs are sensitive and should be treated as secrets.\n\n"
            "-----BEGIN USER NKEY SEED-----\n%s\n------END USER NKEY SEED------\n\n"
            "*************************************************************\n") % (token, user.seed)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    op, sys_acc, acc, stranger = Key(PREFIX_OPERATOR), Key(PREFIX_ACCOUNT), Key(PREFIX_ACCOUNT), Key(PREFIX_ACCOUNT)
    op_jwt = jwt(op, op, "steadfast-test-operator", {"type": "operator", "version": 2,
                                                      "system_account": sys_acc.public})
    with open(os.path.join(out, "server.conf.inc"), "w") as f:
        f.write("operator: %s\nsystem_account: %s\nresolver: MEMORY\nresolver_preload: {\n  %s: %s\n  %s: %s\n}\n" %
                (op_jwt, sys_acc.public, sys_acc.public, account(op, sys_acc, "SYS", False), acc.public,
                 account(op, acc, "steadfast", True)))
    for name, key in (("user", acc), ("stranger", stranger)):
        path = os.path.join(out, name + ".creds")
        with open(path, "w") as f:
            f.write(creds(key, name))
        os.chmod(path, 0o600)


if __name__ == "__main__":
    main()
