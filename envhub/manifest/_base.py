"""``[state] base`` of a sandbox: the host's system, a bundle archive, or ``scheme:reference``.

A base is read in one of three ways (``spec/manifest.md``, the ``[state]`` table):

- ``"host"`` (or no base): the host's read-only system, envhub's own sandbox;
- ``scheme:reference``, when the text before the first ``:`` is a scheme name (a lowercase
  letter, then letters, digits, ``+``, ``-``, ``.``): the workspace runs on the backend an
  installed plugin provides for that scheme. ``oci:`` names a container image, by digest only;
- anything else: a root filesystem archive of the bundle (a bundle path), run by envhub's own
  sandbox.

>>> split_base("oci:docker.io/library/python@sha256:" + "ab" * 32)[0]
'oci'
>>> split_base("rootfs/busybox.tar.gz") is None
True
>>> image_problem("docker.io/library/python:3.12")[0].split(":", 2)[-1]
' an image is referenced by its digest only (@sha256:...), so every run gets the same bytes'
"""

from __future__ import annotations

import re

__all__ = ["HOST_SCHEME", "OCI_SCHEME", "base_image", "image_problem", "split_base"]

#: The scheme of envhub's own sandbox: ``base = "host"`` and bundle archives.
HOST_SCHEME = "host"
#: The scheme of container images: ``base = "oci:REGISTRY/REPOSITORY[:TAG]@sha256:DIGEST"``.
OCI_SCHEME = "oci"

_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*):(.*)$", re.DOTALL)
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_DOMAIN = rf"(?:localhost|{_LABEL}(?:\.{_LABEL})+)(?::[0-9]+)?"
_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(rf"^(?P<name>{_DOMAIN}/{_PART}(?:/{_PART})*)(?::(?P<tag>[\w][\w.-]{{0,127}}))?"
                    r"@(?P<digest>sha256:[0-9a-f]{64})$")
_DIGEST_HOW = ("find its digest with `skopeo inspect --format '{{.Digest}}' docker://IMAGE:TAG`, "
               "`docker buildx imagetools inspect IMAGE:TAG`, or `podman pull IMAGE:TAG` then "
               "`podman image inspect --format '{{.Digest}}' IMAGE:TAG`; then write "
               "base = 'oci:IMAGE@sha256:<64 hex digits>'")


def split_base(value: str) -> tuple[str, str] | None:
    """``(scheme, reference)`` of a ``scheme:reference`` base, or None for ``"host"`` and a
    bundle archive (which envhub's own sandbox runs)."""
    match = _SCHEME.match(value)
    return (match.group(1), match.group(2)) if match else None


def image_problem(reference: str) -> tuple[str, str] | None:
    """``(message, hint)`` when ``reference`` (the part after ``oci:``) is not an image
    referenced by digest with its registry, else None."""
    shown = repr(reference)
    if not reference:
        return "base 'oci:' names no image", _DIGEST_HOW
    name, at, digest = reference.rpartition("@")
    if not at:
        return (f"image {shown} has no digest: an image is referenced by its digest only (@sha256:...), "
                "so every run gets the same bytes", _DIGEST_HOW)
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        return (f"image {shown}: the digest {digest!r} is not 'sha256:' and 64 lowercase hex digits",
                _DIGEST_HOW)
    first = name.split("/", 1)[0]
    if "/" not in name or not ("." in first or ":" in first or first == "localhost"):
        return (f"image {shown} does not name its registry, so engines could resolve it differently",
                f"write the registry first, e.g. 'oci:docker.io/library/{name.split(':')[0]}@{digest}'")
    if not _IMAGE.match(reference):
        return (f"image {shown} is not an image reference (REGISTRY/REPOSITORY[:TAG]@sha256:DIGEST; "
                "repositories are lowercase)", "write it as 'oci:docker.io/library/python@sha256:...'")
    return None


def base_image(value: str | None) -> str | None:
    """The image a base references (``REGISTRY/REPOSITORY[:TAG]@sha256:...``, without ``oci:``),
    or None when it references none."""
    parts = split_base(value) if value else None
    return parts[1] if parts is not None and parts[0] == OCI_SCHEME else None
