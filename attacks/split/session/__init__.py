"""The victim's side of a malicious server's attack (FSHA's): the honest client's session with the server, its
private data, the referee's monitor of the rounds and the run over TCP. Shared like `attacks.split.labels`: no
attack's spec lives here, and nothing here imports an attack's folder (the attack is taken from its spec)."""
