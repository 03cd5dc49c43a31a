"""Replicas: tiny randomly initialised local models with the interfaces of the paper's hub models.

They carry the real architecture family, the family's special tokens and chat-template
structure, and, for reward models with their own code, the same remote-code interface
(written by this project, not copied from the hub): `prbench.replica.rms` builds them. They
prove offline that every entry of config.yaml loads and scores as its model card intends.
"""
