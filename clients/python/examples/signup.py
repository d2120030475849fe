"""A stand-in for a website under test: it signs up the address given as
its argument by mailing it a one-time code through the candidate's door
(POST /emails with the WEBSITEBENCH_* environment it was handed), and
prints the code it issued, as a site would keep it in its database."""

import json
import os
import secrets
import sys
import urllib.request

to = sys.argv[1]
code = f"{secrets.randbelow(10**6):06d}"
body = {
    "from": os.environ["WEBSITEBENCH_MAIL_FROM"],
    "to": [to],
    "subject": "Confirm your sign-up",
    "text": f"Welcome! Your verification code is {code}.\n",
}
req = urllib.request.Request(
    os.environ["WEBSITEBENCH_MAIL_API_URL"],
    data=json.dumps(body).encode(),
    headers={"Authorization": "Bearer " + os.environ["WEBSITEBENCH_MAIL_API_TOKEN"], "Content-Type": "application/json"},
)
with urllib.request.urlopen(req, timeout=10) as resp:
    json.load(resp)
print(code)
