"""Calls one method of RongCloud's official Python SDK (`rongcloud` 2.0.1) against a server.

usage: rc_call.py BASE_URL APP_KEY APP_SECRET Module.method 'JSON keyword arguments'
Prints {"status": HTTP status, "result": the parsed JSON body}. Lists stay lists; a
{"__tuples__": [[a, b], ...]} argument becomes a list of tuples (Group.sync, Chatroom.create).
"""
import json
import sys

from rongcloud import RongCloud
from rongcloud.base import RongCloudBase

base, key, secret, target, arguments = sys.argv[1:6]
RongCloudBase.api_host = base
RongCloudBase.sms_host = base
rc = RongCloud(key, secret)
module, method = target.split(".")
kwargs = json.loads(arguments)
for name, value in list(kwargs.items()):
    if isinstance(value, dict) and "__tuples__" in value:
        kwargs[name] = [tuple(pair) for pair in value["__tuples__"]]
response = getattr(getattr(rc, module), method)(**kwargs)
print(json.dumps({"status": response.status, "result": response.result}))
