"""Reads imserver's /metrics with Prometheus's own text parser (prometheus_client) and prints its
samples as one JSON line: [{"name", "labels", "value"}]. A document the parser refuses makes it
exit non-zero.

Usage: metrics_parse.py BASE_URL
"""
import json
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def main():
    with urllib.request.urlopen(sys.argv[1] + "/metrics") as response:
        if response.status != 200:
            raise SystemExit(f"/metrics answered {response.status}")
        content_type = response.headers.get("Content-Type", "")
        text = response.read().decode("utf-8")
    samples = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.append({"name": sample.name, "labels": sample.labels, "value": sample.value, "type": family.type})
    print(json.dumps({"contentType": content_type, "samples": samples}))


if __name__ == "__main__":
    main()
