"""Runs the test module bundled with `rongcloud` 2.0.1 against a server.

usage: APP_KEY=... APP_SECRET=... run_bundled_tests.py BASE_URL
Run it in a directory holding the jsonsource/*.json files the module reads. Prints one JSON
line {"passed": [...], "failed": {name: reason}} after unittest's own output.
"""
import json
import sys
import unittest

import rongcloud.base as base

base.RongCloudBase.api_host = sys.argv[1]
base.RongCloudBase.sms_host = sys.argv[1]   # keeps the SMS calls on loopback too
import rongcloud.test as bundled  # noqa: E402



def test_names(tests):
    for test in tests:
        if isinstance(test, unittest.TestSuite):
            yield from test_names(test)
        else:
            yield test.id().split(".")[-1]


suite = unittest.defaultTestLoader.loadTestsFromModule(bundled)
names = list(test_names(suite))   # before the run: the runner releases tests as it goes
result = unittest.TextTestRunner(stream=sys.stderr, verbosity=2).run(suite)
failed = {test.id().split(".")[-1]: text.strip().splitlines()[-1] for test, text in result.failures + result.errors}
print(json.dumps({"passed": sorted(set(names) - set(failed)), "failed": failed}))
