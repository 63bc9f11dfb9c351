"""The webhook's own CA and serving certificate: made at start, renewed well before they expire.

Pure functions over bytes (PEM); where the material is kept (a folder, a Secret) is the server's business.
"""

from __future__ import annotations

import datetime as dt
import ipaddress

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_LIFETIME = dt.timedelta(days=3650)
CERT_LIFETIME = dt.timedelta(days=365)
RENEW_BEFORE = dt.timedelta(days=30)  # the serving certificate is renewed this long before it expires
CA_RENEW_BEFORE = dt.timedelta(days=365)


@attrs.frozen
class Bundle:
    ca_cert: bytes
    ca_key: bytes
    cert: bytes
    key: bytes


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_ca(now: dt.datetime, name: str = "omenative-webhook-ca") -> tuple[bytes, bytes]:
    key = _key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + CA_LIFETIME)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def make_serving_cert(ca_cert: bytes, ca_key: bytes, hosts: list[str], now: dt.datetime) -> tuple[bytes, bytes]:
    ca = x509.load_pem_x509_certificate(ca_cert)
    signer = serialization.load_pem_private_key(ca_key, password=None)
    key = _key()
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (x509.CertificateBuilder()
            # A common name holds at most 64 characters and clients match the SANs, not it: a Service in a long
            # namespace still gets a certificate.
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0][:64])]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + CERT_LIFETIME)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(signer, hashes.SHA256()))  # type: ignore[arg-type]
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def make_bundle(hosts: list[str], now: dt.datetime) -> Bundle:
    ca_cert, ca_key = make_ca(now)
    cert, key = make_serving_cert(ca_cert, ca_key, hosts, now)
    return Bundle(ca_cert, ca_key, cert, key)


def needs_renewal(bundle: Bundle, hosts: list[str], now: dt.datetime) -> bool:
    """True when the serving certificate (or its CA) expires soon, or does not cover every host."""
    cert = x509.load_pem_x509_certificate(bundle.cert)
    ca = x509.load_pem_x509_certificate(bundle.ca_cert)
    if cert.not_valid_after_utc - now < RENEW_BEFORE or ca.not_valid_after_utc - now < CA_RENEW_BEFORE:
        return True
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    covered = {str(v) for v in san.get_values_for_type(x509.DNSName)}
    covered |= {str(v) for v in san.get_values_for_type(x509.IPAddress)}
    return not set(hosts) <= covered


def renew(bundle: Bundle | None, hosts: list[str], now: dt.datetime) -> Bundle:
    """A bundle valid for the hosts: the given one if still good; a new serving certificate from the same CA while
    the CA is good (so the caBundle the API server holds stays valid); else a new CA too."""
    if bundle is None:
        return make_bundle(hosts, now)
    if not needs_renewal(bundle, hosts, now):
        return bundle
    ca = x509.load_pem_x509_certificate(bundle.ca_cert)
    if ca.not_valid_after_utc - now < CA_RENEW_BEFORE:
        return make_bundle(hosts, now)
    cert, key = make_serving_cert(bundle.ca_cert, bundle.ca_key, hosts, now)
    return Bundle(bundle.ca_cert, bundle.ca_key, cert, key)
