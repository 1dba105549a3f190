"""One module per library, each defining ``Peer`` (a subclass of :class:`._base.PeerBase`).

These modules run inside the library's own virtual environment (see ``bench.peers.venvs``):
they import only the standard library, ``_base`` and the library they drive.
"""
