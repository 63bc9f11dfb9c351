"""The webhook's certificates: made for the right hosts, renewed before they expire, the CA kept while it is good."""

from __future__ import annotations

import datetime as dt
import ssl

from cryptography import x509

from omenative.webhook.certs import CERT_LIFETIME, RENEW_BEFORE, make_bundle, needs_renewal, renew
from omenative.webhook.server import defaulting_patch, review_response

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def test_a_bundle_serves_its_hosts_and_chains_to_its_ca(tmp_path: object) -> None:
    hosts = ["omenative-webhook.ome.svc", "127.0.0.1"]
    bundle = make_bundle(hosts, NOW)
    cert = x509.load_pem_x509_certificate(bundle.cert)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["omenative-webhook.ome.svc"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert cert.issuer == x509.load_pem_x509_certificate(bundle.ca_cert).subject
    context = ssl.create_default_context(cadata=bundle.ca_cert.decode())
    assert context.get_ca_certs()  # the CA loads as a trust anchor


def test_renewal_before_expiry_keeps_the_ca_so_the_ca_bundle_stays_valid() -> None:
    hosts = ["127.0.0.1"]
    bundle = make_bundle(hosts, NOW)
    assert renew(bundle, hosts, NOW + dt.timedelta(days=10)) is bundle  # still good
    soon = NOW + CERT_LIFETIME - RENEW_BEFORE + dt.timedelta(days=1)
    assert needs_renewal(bundle, hosts, soon)
    renewed = renew(bundle, hosts, soon)
    assert renewed.ca_cert == bundle.ca_cert and renewed.cert != bundle.cert
    assert needs_renewal(bundle, ["127.0.0.1", "other.host"], NOW)  # a new host needs a new certificate


def test_admission_responses_and_defaulting() -> None:
    denied = review_response({"uid": "u1"}, allowed=False, message="why")
    assert denied["response"] == {"uid": "u1", "allowed": False,
                                  "status": {"code": 403, "reason": "Invalid", "message": "why"}}
    warned = review_response({"uid": "u2"}, allowed=True, warnings=("careful",))
    assert warned["response"]["warnings"] == ["careful"]
    patch = defaulting_patch({"spec": {"engine": {"runner": {"name": ""}, "leader": {"runner": {"name": ""}}},
                                       "router": {"runner": {"name": "router"}}}})
    assert patch == [{"op": "remove", "path": "/spec/engine/runner/name"},
                     {"op": "remove", "path": "/spec/engine/leader/runner/name"}]


def test_a_host_longer_than_a_common_name_still_gets_a_certificate() -> None:
    host = "omenative-webhook." + "n" * 60 + ".svc"  # a Service in a long namespace: 82 characters
    bundle = make_bundle([host], dt.datetime.now(dt.UTC))
    cert = x509.load_pem_x509_certificate(bundle.cert)
    assert cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName) == [host]
