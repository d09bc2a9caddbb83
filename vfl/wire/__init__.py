"""Split learning over TCP: the label party and the feature parties as separate programs.

    keys.py        the secrets: the shared one, each party's own key, the proofs and frame keys derived from them
    handshake.py   who may join (mutual HMAC proof of the party's key on its connection) and the session's terms
    tls.py         optional TLS for those connections (the standard library's `ssl`)
    frames.py      the messages as they travel, and the checks a receiver makes before using one
    channel.py     the transport: authenticated frames on the party's one TCP connection, waits bounded
    remote.py      the clients as the server sees them (`RemoteParties`, `WireSession`)
    server.py      the label party's program (`splitlab serve`)
    client.py      a client's program (`splitlab client`)
    kinds.py       the kinds of client it can be: a split-learning feature party, or FSHA's honest victim
    victim_session.py  a malicious server's session with FSHA's victim (`OwnBatchSession`)
    roles.py       the server roles, and the hook through which an attack becomes one
    checkpoints.py each side's per-epoch checkpoints (`--resume`)
    lifecycle.py   how a program stops (Ctrl-C, `kill PID`) and what it says it saved
    launch.py      `--transport tcp` of `train` and the attacks: both sides on this machine from one command
    cli.py         the `serve` and `client` commands
"""
