"""Certificates and kubeconfigs for a local cluster, made with `cryptography`.

One CA signs everything (API server serving cert, kubelet serving cert, client certs of the
components and the admin); the service-account key pair signs tokens. Client identities follow
Kubernetes conventions, so RBAC and the Node authorizer behave as in any normal cluster.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=3650)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _write(path: Path, data: bytes, mode: int = 0o600) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)


@dataclass
class CertPair:
    cert: Path
    key: Path


class ClusterPKI:
    """Creates (once) and finds the certificates of one cluster under ``directory``."""

    def __init__(self, directory: Path):
        self.dir = directory

    @property
    def ca(self) -> CertPair:
        return CertPair(self.dir / "ca.crt", self.dir / "ca.key")

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"

    def pair(self, name: str) -> CertPair:
        return CertPair(self.dir / f"{name}.crt", self.dir / f"{name}.key")

    def exists(self) -> bool:
        return self.ca.cert.is_file() and self.ca.key.is_file() and self.sa_key.is_file()

    def ensure_ca(self) -> None:
        if self.exists():
            return
        key = _key()
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sregym-ca")])
        now = dt.datetime.now(dt.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
                .not_valid_after(now + VALIDITY)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False,
                                             encipher_only=False, decipher_only=False), critical=True)
                .sign(key, hashes.SHA256()))
        _write(self.ca.key, _pem_key(key))
        _write(self.ca.cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
        sa = _key()
        _write(self.sa_key, _pem_key(sa))
        _write(self.sa_pub, sa.public_key().public_bytes(serialization.Encoding.PEM,
                                                         serialization.PublicFormat.SubjectPublicKeyInfo), 0o644)

    def issue(self, name: str, common_name: str, *, orgs: tuple[str, ...] = (), dns: tuple[str, ...] = (),
              ips: tuple[str, ...] = (), server: bool = False, client: bool = True) -> CertPair:
        """Issue ``name.crt``/``name.key`` unless they already exist with the same subject and SANs."""
        pair = self.pair(name)
        if pair.cert.is_file() and pair.key.is_file() and self._matches(pair, common_name, dns, ips):
            return pair
        ca_key = serialization.load_pem_private_key(self.ca.key.read_bytes(), None)
        ca_cert = x509.load_pem_x509_certificate(self.ca.cert.read_bytes())
        key = _key()
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        now = dt.datetime.now(dt.timezone.utc)
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
        builder = (x509.CertificateBuilder().subject_name(x509.Name(attrs)).issuer_name(ca_cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        sans = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        _write(pair.key, _pem_key(key))
        _write(pair.cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
        return pair

    @staticmethod
    def _matches(pair: CertPair, cn: str, dns: tuple[str, ...], ips: tuple[str, ...]) -> bool:
        try:
            cert = x509.load_pem_x509_certificate(pair.cert.read_bytes())
        except ValueError:
            return False
        if cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value != cn:
            return False
        try:
            san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return not dns and not ips
        have_dns = set(san.get_values_for_type(x509.DNSName))
        have_ips = {str(i) for i in san.get_values_for_type(x509.IPAddress)}
        return have_dns == set(dns) and have_ips == set(ips)

    def kubeconfig(self, path: Path, *, server: str, user: str, pair: CertPair, cluster: str,
                   context: str | None = None) -> Path:
        """Write a kubeconfig that authenticates with ``pair`` (paths, not embedded data)."""
        ctx = context or f"{user}@{cluster}"
        doc = {
            "apiVersion": "v1", "kind": "Config", "current-context": ctx,
            "clusters": [{"name": cluster, "cluster": {"server": server,
                                                       "certificate-authority-data": _b64(self.ca.cert)}}],
            "users": [{"name": user, "user": {"client-certificate-data": _b64(pair.cert),
                                              "client-key-data": _b64(pair.key)}}],
            "contexts": [{"name": ctx, "context": {"cluster": cluster, "user": user}}],
        }
        _write(path, yaml.safe_dump(doc, sort_keys=False).encode())
        return path


def _b64(path: Path) -> str:
    import base64

    return base64.b64encode(path.read_bytes()).decode()
