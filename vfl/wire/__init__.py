"""Split learning over TCP: the label party and the feature parties as separate programs.

    handshake.py   who may join (HMAC proof of the shared secret over torch's TCPStore) and the session's terms
    frames.py      the messages as they travel, and the checks a receiver makes before using one
    channel.py     the transport: frames over gloo point-to-point send/recv, waits bounded and interruptible
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
