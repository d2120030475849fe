#!/usr/bin/env python3
"""Writes the bulk of internal/otp/testdata/corpus/ (files named gNNN-*.mail).

The corpus is test data, checked in; this script is how most of it was
written: hand-written message templates, modelled on the formats real
services send (sign-up, sign-in, 2FA, magic link, password reset,
invitation, e-mail change, and mail with nothing to do), combined with
hand-written footers (postal address, phone, social links) and brands.
Files named hNNN-*.mail are written by hand; files named xNNN-*.mail were
written by hand after the extractor's rules were done, as a held-out check
(scored before any fix: otp 11/12, action_link 12/12). Each file carries
its expected otp and action_link in its header block ("-" for none).

    python3 internal/otp/testdata/gen_corpus.py

Re-running rewrites the g-files identically (fixed seed).
"""
import html as H
import os
import random

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
rnd = random.Random(14)

BRANDS = [
    ("Acme", "acme.example"), ("Northwind", "northwind.example"), ("Lumen", "lumen.example"),
    ("Parcelly", "parcelly.example"), ("Quillbox", "quillbox.example"), ("Tandem", "tandem.example"),
    ("Orbit Notes", "orbitnotes.example"), ("Fernway", "fernway.example"), ("Kitebase", "kitebase.example"),
    ("Mosaic HR", "mosaichr.example"), ("Brightdesk", "brightdesk.example"), ("Cobalt Pay", "cobaltpay.example"),
]

FOOTERS_EN = [
    ("Acme Inc., 1 Example Way, Springfield 55555", "Call us: +1 (555) 010-4477"),
    ("548 Market St, Suite 300, San Francisco, CA 94104, USA", "Phone: 1-800-555-0199"),
    ("Floor 3, 1 Poultry, London EC2R 8EJ, United Kingdom", "Tel: +44 20 7946 0958"),
    ("2200 Mission College Blvd, Santa Clara, CA 95054", "Support line: (555) 301-2299"),
    ("77 Harbour Street, Level 12, Sydney NSW 2000, Australia", "+61 2 9123 4567"),
    ("PO Box 4821, Austin, TX 78701", "Questions? Call 0800 123 4567"),
]
FOOTERS = {
    "de": ("Musterstraße 12, 10115 Berlin, Deutschland", "Telefon: +49 30 1234567", "Abmelden"),
    "fr": ("12 rue de la Paix, 75002 Paris, France", "Téléphone : +33 1 23 45 67 89", "Se désinscrire"),
    "es": ("Calle de Alcalá 45, 28014 Madrid, España", "Teléfono: +34 912 345 678", "Darse de baja"),
    "pt": ("Av. Paulista, 1578 - Bela Vista, São Paulo - SP, 01310-200, Brasil", "Telefone: +55 11 3456-7890", "Cancelar inscrição"),
    "it": ("Via Roma 10, 20121 Milano MI, Italia", "Tel. +39 02 1234 5678", "Annulla iscrizione"),
    "nl": ("Herengracht 420, 1017 BZ Amsterdam, Nederland", "Telefoon: +31 20 123 4567", "Afmelden"),
    "zh": ("北京市海淀区中关村大街1号 100080", "客服电话：+86 10 6255 1234", "退订"),
    "ja": ("〒150-0002 東京都渋谷区渋谷2-21-1", "電話：03-1234-5678", "配信停止"),
    "ko": ("서울특별시 강남구 테헤란로 152, 06236", "고객센터 전화: 02-1234-5678", "수신 거부"),
    "ru": ("ул. Льва Толстого, д. 16, Москва, 119021, Россия", "Телефон: +7 495 123-45-67", "Отписаться"),
}
SOCIAL = ["https://twitter.com/{b}", "https://www.facebook.com/{b}", "https://www.linkedin.com/company/{b}",
          "https://www.instagram.com/{b}", "https://www.youtube.com/@{b}"]

files = []


def code6():
    return "%06d" % rnd.randrange(100000, 999999)


def token():
    return "".join(rnd.choice("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(24))


def letters(n):
    return "".join(rnd.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(n))


def social_html(slug):
    links = " ".join('<a href="%s"><img src="https://cdn.%s.example/icons/%d.png" alt="" width="24"></a>' % (
        s.format(b=slug), slug, i) for i, s in enumerate(SOCIAL[:4]))
    return '<p style="text-align:center">%s</p>' % links


def footer_html(brand, dom, lang="en", rich=True):
    slug = brand.lower().replace(" ", "")
    if lang == "en":
        addr, phone = rnd.choice(FOOTERS_EN)
        unsub = "Unsubscribe"
        prefs = "Email preferences"
        priv = "Privacy Policy"
    else:
        addr, phone, unsub = FOOTERS[lang]
        prefs, priv = "Preferences", "Privacy"
    parts = []
    if rich:
        parts.append(social_html(slug))
        parts.append('<p style="font-size:12px;color:#888">%s<br>%s</p>' % (H.escape(addr), H.escape(phone)))
    parts.append('<p style="font-size:12px;color:#888"><a href="https://%s/unsubscribe?u=%s">%s</a> · '
                 '<a href="https://%s/settings/email">%s</a> · <a href="https://%s/privacy">%s</a></p>'
                 % (dom, token()[:10], unsub, dom, prefs, dom, priv))
    parts.append('<p style="font-size:11px;color:#aaa">© 2026 %s. All rights reserved.</p>' % H.escape(brand))
    return "\n".join(parts)


def footer_text(brand, dom, lang="en", rich=True):
    slug = brand.lower().replace(" ", "")
    if lang == "en":
        addr, phone = rnd.choice(FOOTERS_EN)
        unsub = "Unsubscribe"
    else:
        addr, phone, unsub = FOOTERS[lang]
    lines = ["", "--"]
    if rich:
        lines += [addr, phone, "Twitter: https://twitter.com/%s | LinkedIn: https://www.linkedin.com/company/%s" % (slug, slug)]
    lines += ["%s: https://%s/unsubscribe?u=%s" % (unsub, dom, token()[:10]), "© 2026 %s" % brand]
    return "\n".join(lines)


def wrap_html(brand, body, footer, preheader=""):
    pre = ""
    if preheader:
        pre = ('<div style="display:none;max-height:0;overflow:hidden">%s%s</div>'
               % (H.escape(preheader), "&zwnj;&nbsp;" * 20))
    return ("""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%s</title>
<style>body{font-family:Helvetica,Arial,sans-serif} .btn{background:#2f6fed;color:#fff}</style></head>
<body style="margin:0;background:#f4f5f7">%s
<table width="100%%" cellpadding="0" cellspacing="0" role="presentation"><tr><td align="center">
<table width="600" cellpadding="0" cellspacing="0" style="background:#ffffff;border-radius:8px">
<tr><td style="padding:24px"><a href="https://%s.example/"><img src="https://cdn.example/logo.png" alt="%s" height="32"></a></td></tr>
<tr><td style="padding:0 24px 24px 24px;font-size:15px;line-height:22px;color:#222">
%s
</td></tr>
<tr><td style="padding:24px;border-top:1px solid #eee">
%s
</td></tr>
</table></td></tr></table></body></html>
""" % (H.escape(brand), pre, brand.lower().replace(" ", ""), H.escape(brand), body, footer))


def button(href, label, color="#2f6fed"):
    return ('<table role="presentation" cellpadding="0" cellspacing="0"><tr><td bgcolor="%s" style="border-radius:6px">'
            '<a href="%s" style="display:inline-block;padding:12px 24px;color:#ffffff;text-decoration:none;font-weight:bold">%s</a>'
            '</td></tr></table>' % (color, H.escape(href), H.escape(label)))


def big_code(code, style=None):
    style = style or rnd.choice([
        "font-size:32px;font-weight:bold;letter-spacing:6px",
        "font-size:28px;letter-spacing:0.3em;font-family:'Courier New',monospace",
        "font-size:36px;font-weight:700",
        "font-size:24px;font-weight:600;letter-spacing:4px;background:#f0f2f5;padding:12px",
    ])
    return '<table role="presentation" cellpadding="0" cellspacing="0"><tr><td style="%s">%s</td></tr></table>' % (style, H.escape(code))


def cells_code(code):
    tds = "".join('<td style="width:40px;height:48px;border:1px solid #ccd;font-size:26px;text-align:center">%s</td>' % c
                  for c in code)
    return '<table role="presentation" cellspacing="6"><tr>%s</tr></table>' % tds


def emit(name, subject, otp, link, text=None, html=None, kind="", lang="en"):
    files.append((name, subject, otp, link, text, html, kind, lang))


def brand():
    return rnd.choice(BRANDS)


# ---- sign-up with a code -------------------------------------------------

def signup_code(i, fmt, grouped=None, rich=True):
    b, dom = brand()
    code = code6()
    shown = code
    if grouped == "space":
        shown = code[:3] + " " + code[3:]
    elif grouped == "dash":
        shown = code[:3] + "-" + code[3:]
    subj = rnd.choice(["Verify your email address", "Confirm your %s account" % b, "Your %s sign-up" % b,
                       "Finish creating your account"])
    intro = rnd.choice([
        "Thanks for signing up for %s! To finish creating your account, enter this verification code:" % b,
        "Welcome to %s. Use the code below to verify your email address." % b,
        "You're almost there. Please confirm your email address with this code:",
    ])
    expiry = rnd.choice(["This code expires in 10 minutes.", "The code is valid for 15 minutes.",
                         "It will expire in 30 minutes."])
    text = "Hi there,\n\n%s\n\n    %s\n\n%s\n\nIf you didn't create an account, you can safely ignore this email.\n\nThe %s team" % (
        intro, shown, expiry, b)
    text += footer_text(b, dom, rich=rich)
    body = ('<h1 style="font-size:22px">Verify your email</h1><p>%s</p>%s<p>%s</p>'
            '<p style="color:#666">If you didn\'t create an account, you can safely ignore this email.</p>'
            % (H.escape(intro), big_code(shown), expiry))
    html = wrap_html(b, body, footer_html(b, dom, rich=rich), preheader="Your verification code")
    emit("signup-code-%d" % i, subj, code, "-", text if fmt in ("text", "both") else None,
         html if fmt in ("html", "both") else None, "sign-up")


def signup_code_and_button(i):
    b, dom = brand()
    code = code6()
    link = "https://%s/verify-email?token=%s" % (dom, token())
    subj = "%s is your %s verification code" % (code, b)
    body = ('<p>Hi Sam,</p><p>Confirm your email address to activate your %s account.</p>%s'
            '<p>Or enter this code on the sign-up page:</p>%s<p>The code and the link expire in 24 hours.</p>'
            % (H.escape(b), button(link, "Verify email address"), big_code(code)))
    text = ("Hi Sam,\n\nConfirm your email address to activate your %s account:\n%s\n\n"
            "Or enter this code on the sign-up page: %s\n\nThe code and the link expire in 24 hours.\n" % (b, link, code))
    text += footer_text(b, dom)
    emit("signup-code-button-%d" % i, subj, code, link, text, wrap_html(b, body, footer_html(b, dom)), "sign-up")


def signup_cells(i):
    b, dom = brand()
    code = code6()
    body = ('<p>Enter the following code in the %s app to confirm your email address.</p>%s'
            '<p>Order your first box within 7 days and get free delivery on orders over $49.</p>' % (H.escape(b), cells_code(code)))
    emit("signup-cells-%d" % i, "Confirm your email", code, "-", None, wrap_html(b, body, footer_html(b, dom)), "sign-up")


# ---- sign-in / 2FA codes ---------------------------------------------------

def signin_subject_only(i):
    b, dom = brand()
    code = code6()
    subj = "%s is your %s login code" % (code, b)
    text = "Hello,\n\nSomeone (hopefully you) is trying to sign in to %s from Chrome on macOS.\nUse the code in the subject line to continue. It expires at 14:35 UTC.\n\nRequest ID 20261201-8842\n" % b
    emit("signin-subject-%d" % i, subj, code, "-", text, None, "sign-in")


def signin_prefixed(i):
    b, dom = brand()
    code = code6()
    pre = rnd.choice(["G", "FB", "WA", "M"])
    subj = "%s-%s is your %s verification code" % (pre, code, b)
    text = "%s-%s is your %s verification code. Don't share it with anyone.\n" % (pre, code, b)
    html = None
    if i % 2:
        body = '<p>Use this code to finish signing in:</p><p style="font-size:30px;font-weight:bold">%s-%s</p><p>Don\'t share it with anyone.</p>' % (pre, code)
        html = wrap_html(b, body, footer_html(b, dom))
        text = None
    emit("signin-prefix-%d" % i, subj, code, "-", text, html, "sign-in")


def signin_letters(i, hyphen):
    b, dom = brand()
    raw = letters(6)
    shown = raw[:3] + "-" + raw[3:] if hyphen else raw
    if not any(c.isdigit() for c in raw):
        raw = raw[:2] + "7" + raw[3:]
        shown = raw[:3] + "-" + raw[3:] if hyphen else raw
    subj = "%s confirmation code: %s" % (b, shown) if i % 3 == 0 else "Your %s confirmation code" % b
    body = ('<h2>Confirm your email address</h2><p>Your confirmation code is below — enter it in your open browser window and we\'ll help you get signed in.</p>'
            '<table><tr><td style="background:#f5f4f5;padding:20px;font-size:30px;letter-spacing:4px;font-family:monospace">%s</td></tr></table>'
            '<p>If you didn\'t request this email, there\'s nothing to worry about — you can safely ignore it.</p>' % shown)
    text = ("Confirm your email address\n\nYour confirmation code is below - enter it in your open browser window and we'll help you get signed in.\n\n%s\n\n"
            "If you didn't request this email, there's nothing to worry about - you can safely ignore it.\n" % shown)
    emit("signin-letters-%d" % i, subj, raw, "-", text + footer_text(b, dom),
         wrap_html(b, body, footer_html(b, dom)), "sign-in")


def twofa_grouped8(i):
    b, dom = brand()
    code = "%08d" % rnd.randrange(10000000, 99999999)
    shown = code[:4] + " " + code[4:]
    text = ("Your %s two-factor authentication code is:\n\n%s\n\nThis code was requested on December 1, 2026 at 09:14 from IP 203.0.113.42 (Lisbon, Portugal).\n"
            "Account: sam.jones@example.com\n" % (b, shown))
    emit("2fa-grouped8-%d" % i, "%s security code" % b, code, "-", text + footer_text(b, dom), None, "2fa")


def twofa_sms_style(i):
    b, dom = brand()
    code = "%04d" % rnd.randrange(1000, 9999) if i % 2 else code6()
    text = rnd.choice([
        "Your %s code: %s. Don't share it. Call 1-800-555-0199 if you did not request it.",
        "%s: %s is your one-time passcode. Valid for 5 min.",
        "Use %s code %s to verify your login. Never share this code.",
    ])
    if text.startswith("%s:"):
        text = text % (b, code)
    else:
        text = text % (b, code)
    emit("2fa-short-%d" % i, "Your %s code" % b if i % 3 else "Sign-in attempt", code, "-", text, None, "2fa")


def twofa_new_vs_expired(i):
    b, dom = brand()
    old, new = code6(), code6()
    variants = [
        ("You asked for a new code. Your previous code %s has expired and can no longer be used.\n\nYour new verification code is %s.\n" % (old, new)),
        ("Your new %s code is %s. It replaces the expired code %s, which no longer works.\n" % (b, new, old)),
        ("The code we sent earlier (%s) has expired.\nHere is a new one:\n\n%s\n\nIt is valid for 10 minutes.\n" % (old, new)),
    ]
    t = variants[i % 3]
    if i % 2:
        body = "".join("<p>%s</p>" % H.escape(l) for l in t.strip().split("\n") if l.strip())
        body = body.replace("<p>%s</p>" % new, big_code(new))
        emit("2fa-newcode-%d" % i, "Your new %s code" % b, new, "-", None, wrap_html(b, body, footer_html(b, dom)), "2fa")
    else:
        emit("2fa-newcode-%d" % i, "Your new %s code" % b, new, "-", t + footer_text(b, dom), None, "2fa")


def purchase_confirm_code(i):
    b, dom = brand()
    code = code6()
    order = "%08d" % rnd.randrange(10000000, 99999999)
    text = ("Confirm your purchase\n\nOrder %s — total $1,249.00 (2 items)\nPlaced on 01/12/2026 at 10:42.\n\n"
            "To approve this payment, enter the security code %s on the checkout page.\n"
            "Card ending in 4821.\n" % (order, code))
    emit("2fa-purchase-%d" % i, "Approve your payment for order #%s" % order, code, "-", text + footer_text(b, dom), None, "2fa")


# ---- magic links -------------------------------------------------------------

def magic_button(i, tracked):
    b, dom = brand()
    raw = "https://%s/auth/magic?token=%s" % (dom, token())
    href = "https://click.mail.%s/ls/click?upn=%s-%s" % (dom.split(".")[0] + ".example", token(), token()[:8]) if tracked else raw
    label = rnd.choice(["Sign in to %s" % b, "Log in", "Sign in", "Log in to %s" % b])
    body = ('<p>Hi,</p><p>Click the button below to sign in to your %s account. This link expires in 15 minutes and can only be used once.</p>%s'
            '<p style="color:#666;font-size:13px">Or copy and paste this URL into your browser:<br><a href="%s">%s</a></p>'
            '<p style="color:#666;font-size:13px">If you didn\'t try to sign in, you can safely ignore this email.</p>'
            % (H.escape(b), button(href, label), H.escape(href), H.escape(raw if not tracked else href)))
    text = ("Hi,\n\nSign in to your %s account by opening this link (expires in 15 minutes, single use):\n\n%s\n\n"
            "If you didn't try to sign in, you can safely ignore this email.\n" % (b, raw))
    text += footer_text(b, dom, rich=i % 2 == 0)
    emit("magic-button-%d" % i, "Your sign-in link for %s" % b, "-", href, text, wrap_html(b, body, footer_html(b, dom, rich=i % 2 == 0)), "magic-link")


def magic_text(i):
    b, dom = brand()
    link = "https://%s/login/email?t=%s&redirect=%%2Fdashboard" % (dom, token())
    text = rnd.choice([
        "Hello!\n\nClick the link below to log in to %s:\n\n%s\n\nThis link will expire in 20 minutes. If you didn't request this, ignore this email.\n",
        "Here's your magic link for %s:\n%s\n\nIt works once and expires in 1 hour.\n",
        "Tap to sign in to %s:\n\n%s\n\nSent at 08:15 on 2026-12-01 from 198.51.100.7.\n",
    ]) % (b, link)
    emit("magic-text-%d" % i, "Log in to %s" % b, "-", link, text + footer_text(b, dom), None, "magic-link")


def magic_and_code(i):
    b, dom = brand()
    code = code6()
    link = "https://%s/login/verify?email=sam%%40example.com&code=%s" % (dom, code)
    body = ('<p>Click the button below to sign in to %s.</p>%s<p>Or sign in using this temporary code:</p>%s'
            '<p style="color:#888">This link and code will only be valid for the next 10 minutes.</p>'
            % (H.escape(b), button(link, "Sign in to %s" % b), big_code(code)))
    emit("magic-code-%d" % i, "Your %s login code is %s" % (b, code) if i % 2 else "Sign in to %s" % b, code, link,
         None, wrap_html(b, body, footer_html(b, dom)), "magic-link")


# ---- password reset ----------------------------------------------------------

def reset_button(i):
    b, dom = brand()
    link = "https://%s/password/reset?token=%s" % (dom, token())
    label = rnd.choice(["Reset password", "Reset your password", "Choose a new password", "Set new password"])
    body = ('<h1 style="font-size:20px">Reset your password</h1>'
            '<p>We received a request to reset the password for the %s account associated with sam.jones@example.com.</p>%s'
            '<p>This link will expire in 60 minutes. If you didn\'t request a password reset, you can ignore this email; your password won\'t change.</p>'
            '<p>Need help? Visit our <a href="https://help.%s/articles/360001">Help Center</a>.</p>' % (H.escape(b), button(link, label), dom))
    text = ("Reset your password\n\nWe received a request to reset the password for the %s account associated with sam.jones@example.com.\n\n"
            "%s: %s\n\nThis link will expire in 60 minutes. If you didn't request a password reset, you can ignore this email.\n" % (b, label, link))
    emit("reset-button-%d" % i, "Reset your %s password" % b, "-", link, text + footer_text(b, dom, rich=i % 3 != 0),
         wrap_html(b, body, footer_html(b, dom, rich=i % 3 != 0)), "password-reset")


def reset_text(i):
    b, dom = brand()
    link = "https://accounts.%s/recover/%s" % (dom, token())
    text = ("Hi Sam,\n\nSomeone requested a password reset for your %s account (ID 48213377).\n"
            "If it was you, reset your password here:\n%s\n\nThe link is valid until 11:30 PM PST.\n\n"
            "If you didn't ask for this, you don't need to do anything.\n" % (b, link))
    emit("reset-text-%d" % i, "Password reset request", "-", link, text + footer_text(b, dom), None, "password-reset")


def reset_code(i):
    b, dom = brand()
    code = code6()
    text = ("We received a request to reset your %s password.\n\nYour password reset code is: %s\n\n"
            "Enter it in the app within 15 minutes. For security, this request was made from Firefox on Windows 11 near Berlin, Germany.\n" % (b, code))
    emit("reset-code-%d" % i, "%s password reset code" % b, code, "-", text + footer_text(b, dom), None, "password-reset")


# ---- invitations -------------------------------------------------------------

def invite(i):
    b, dom = brand()
    inviter = rnd.choice(["Ana Ruiz", "Tom Becker", "Priya Shah", "Lee Chen"])
    team = rnd.choice(["Design Ops", "Growth 2026", "Platform", "Finance EMEA"])
    link = "https://%s/invites/%s/accept" % (dom, token())
    label = rnd.choice(["Accept invitation", "Join %s" % team, "Accept invite"])
    body = ('<p><b>%s</b> has invited you to join the <b>%s</b> workspace on %s.</p>%s'
            '<p>%s workspace has 24 members and 1,200 documents.</p><p>This invitation expires on December 8, 2026.</p>'
            % (H.escape(inviter), H.escape(team), H.escape(b), button(link, label), H.escape(team)))
    text = "%s has invited you to join the %s workspace on %s.\n\n%s: %s\n\nThis invitation expires on December 8, 2026.\n" % (
        inviter, team, b, label, link)
    emit("invite-%d" % i, "%s invited you to %s" % (inviter, team), "-", link, text + footer_text(b, dom),
         wrap_html(b, body, footer_html(b, dom)) if i % 3 else None, "invitation")


# ---- e-mail change -------------------------------------------------------------

def email_change(i):
    b, dom = brand()
    if i % 2:
        link = "https://%s/account/email/confirm?c=%s" % (dom, token())
        body = ('<p>You asked to change the email address on your %s account from s***@example.com to sam.new@example.org.</p>'
                '%s<p>Until you confirm, we keep sending mail to your old address.</p>' % (H.escape(b), button(link, "Confirm new email")))
        emit("email-change-link-%d" % i, "Confirm your new email address", "-", link, None, wrap_html(b, body, footer_html(b, dom)), "email-change")
    else:
        code = code6()
        text = ("You requested to change your %s email address to sam.new@example.org.\n\nTo confirm the change, enter this code:\n%s\n\n"
                "If you did not request this change, contact support at +1 (555) 010-4477.\n" % (b, code))
        emit("email-change-code-%d" % i, "Confirm your email change", code, "-", text + footer_text(b, dom), None, "email-change")


# ---- no action -------------------------------------------------------------------

def welcome(i):
    b, dom = brand()
    body = ('<h1 style="font-size:26px">Welcome to %s, Sam!</h1><p>Your account is ready. Here are three things to try first:</p>'
            '<ul><li>Create your first project</li><li>Invite up to 5 teammates on the free plan</li><li>Connect Slack or Teams</li></ul>%s'
            '<p>Join 40,000 teams who ship faster with %s. Questions? Read the <a href="https://docs.%s/">docs</a> or reply to this email.</p>'
            % (H.escape(b), button("https://app.%s/projects/new" % dom, "Create a project"), H.escape(b), dom))
    text = "Welcome to %s, Sam!\n\nYour account is ready.\n\nCreate a project: https://app.%s/projects/new\nDocs: https://docs.%s/\n" % (b, dom, dom)
    emit("welcome-%d" % i, "Welcome to %s" % b, "-", "-", text + footer_text(b, dom), wrap_html(b, body, footer_html(b, dom)), "welcome")


def receipt(i):
    b, dom = brand()
    order = rnd.randrange(100000, 9999999)
    inv = "INV-2026-%05d" % rnd.randrange(1, 99999)
    rows = "".join('<tr><td>%s</td><td align="right">%d</td><td align="right">$%d.%02d</td></tr>' % (
        name, q, p, c) for name, q, p, c in [("Pro plan (annual)", 1, 1188, 0), ("Extra seats", 3, 144, 0), ("Tax", 1, 110, 88)])
    body = ('<h2>Thanks for your order</h2><p>Order #%d · Invoice %s · December 1, 2026</p>'
            '<table width="100%%">%s<tr><td><b>Total</b></td><td></td><td align="right"><b>$1,442.88</b></td></tr></table>'
            '<p>Paid with Visa ending in 4242. Billing address: 1200 Pine Street, Apt 4B, Seattle, WA 98101.</p>%s'
            % (order, inv, rows, button("https://%s/orders/%d" % (dom, order), "View order")))
    text = ("Thanks for your order\n\nOrder #%d\nInvoice %s\nDate: 2026-12-01\nTotal: $1,442.88\nPaid with Visa ending in 4242\n"
            "View order: https://%s/orders/%d\n" % (order, inv, dom, order))
    emit("receipt-%d" % i, "Your %s receipt [#%d]" % (b, order), "-", "-", text + footer_text(b, dom),
         wrap_html(b, body, footer_html(b, dom)) if i % 2 == 0 else None, "receipt")


def newsletter(i):
    b, dom = brand()
    body = ('<h1>The %s Monthly — December 2026</h1>'
            '<p>This month we crossed 250,000 users and shipped 37 improvements.</p>'
            '<h3>Passkeys are here</h3><p>You can now sign in with a passkey on any device running iOS 17 or Android 14. '
            '<a href="https://%s/blog/passkeys">Read more</a></p>'
            '<h3>Join our webinar on December 12 at 17:00 CET</h3><p>Seats are limited to 500. <a href="https://%s/events/2026-12-webinar">Save your seat</a></p>'
            '<p>Use code WINTER25 for 25%% off any annual plan until 31 December.</p>'
            % (H.escape(b), dom, dom))
    text = ("The %s Monthly - December 2026\n\nThis month we crossed 250,000 users and shipped 37 improvements.\n\n"
            "Passkeys are here: https://%s/blog/passkeys\nWebinar on December 12 at 17:00 CET: https://%s/events/2026-12-webinar\n"
            "Use code WINTER25 for 25%% off any annual plan until 31 December.\n" % (b, dom, dom))
    emit("newsletter-%d" % i, "%s Monthly: passkeys, webinar and 25%% off" % b, "-", "-", text + footer_text(b, dom),
         wrap_html(b, body, footer_html(b, dom)), "newsletter")


def signin_alert(i):
    b, dom = brand()
    body = ('<p>We noticed a new sign-in to your %s account.</p><table><tr><td>Device</td><td>Chrome 131 on Windows 11</td></tr>'
            '<tr><td>Location</td><td>Porto, Portugal</td></tr><tr><td>Time</td><td>December 1, 2026, 14:32 UTC</td></tr>'
            '<tr><td>IP address</td><td>203.0.113.42</td></tr></table>'
            '<p>If this was you, you don\'t need to do anything. If this wasn\'t you, <a href="https://%s/security/reset?s=%s">secure your account</a>.</p>'
            % (H.escape(b), dom, token()))
    emit("signin-alert-%d" % i, "New sign-in to your %s account" % b, "-", "-", None, wrap_html(b, body, footer_html(b, dom)), "notice")


def shipping(i):
    b, dom = brand()
    track = "1Z999AA1%010d" % rnd.randrange(10 ** 9, 10 ** 10)
    text = ("Good news! Your order 4471-2290 has shipped.\n\nCarrier: UPS\nTracking number: %s\nEstimated delivery: Thu, Dec 4, 2026\n"
            "Track your package: https://%s/track/%s\n" % (track, dom, track))
    emit("shipping-%d" % i, "Your order has shipped", "-", "-", text + footer_text(b, dom), None, "notice")


def password_changed(i):
    b, dom = brand()
    text = ("Your %s password was changed on December 1, 2026 at 16:05 (UTC).\n\n"
            "If you made this change, no further action is needed.\nIf you didn't, reset your password now: https://%s/password/reset\n"
            "or call us at +1 (555) 010-4477.\n" % (b, dom))
    emit("password-changed-%d" % i, "Your password was changed", "-", "-", text + footer_text(b, dom), None, "notice")


# ---- other languages -------------------------------------------------------------------

L10N_CODE = {
    "de": ("Ihr Bestätigungscode", "Hallo,\n\nIhr Bestätigungscode für {b} lautet:", "Der Code ist 10 Minuten gültig. Wenn Sie diese Anfrage nicht gestellt haben, ignorieren Sie diese E-Mail."),
    "fr": ("Votre code de vérification", "Bonjour,\n\nVoici votre code de vérification {b} :", "Ce code expire dans 10 minutes. Si vous n'êtes pas à l'origine de cette demande, ignorez cet e-mail."),
    "es": ("Tu código de verificación", "Hola:\n\nTu código de verificación de {b} es:", "El código caduca en 10 minutos. Si no solicitaste este código, ignora este correo."),
    "pt": ("Seu código de verificação", "Olá,\n\nSeu código de verificação do {b} é:", "O código expira em 10 minutos. Se você não solicitou, ignore este e-mail."),
    "it": ("Il tuo codice di verifica", "Ciao,\n\nil tuo codice di verifica {b} è:", "Il codice scade tra 10 minuti. Se non hai richiesto tu questo codice, ignora questa email."),
    "nl": ("Je verificatiecode", "Hallo,\n\nJe verificatiecode voor {b} is:", "De code is 10 minuten geldig. Heb je dit niet aangevraagd? Negeer deze e-mail dan."),
    "zh": ("您的验证码", "您好！\n\n您正在注册 {b}，验证码为：", "验证码10分钟内有效，请勿泄露给他人。如非本人操作，请忽略本邮件。"),
    "ja": ("認証コードのお知らせ", "{b}をご利用いただきありがとうございます。\n\n認証コードは以下のとおりです。", "このコードの有効期限は10分です。お心当たりがない場合は、このメールを破棄してください。"),
    "ko": ("인증번호 안내", "안녕하세요, {b}입니다.\n\n회원가입을 위한 인증번호입니다.", "인증번호는 10분 동안 유효합니다. 본인이 요청하지 않았다면 이 메일을 무시하세요."),
    "ru": ("Ваш код подтверждения", "Здравствуйте!\n\nВаш код подтверждения для {b}:", "Код действителен 10 минут. Если вы не запрашивали код, просто проигнорируйте это письмо."),
}

L10N_LINK = {
    "de": ("Bestätigen Sie Ihre E-Mail-Adresse", "Bitte bestätigen Sie Ihre E-Mail-Adresse, um Ihr Konto zu aktivieren.", "E-Mail-Adresse bestätigen"),
    "fr": ("Confirmez votre adresse e-mail", "Merci de confirmer votre adresse e-mail pour activer votre compte.", "Confirmer mon adresse"),
    "es": ("Restablece tu contraseña", "Recibimos una solicitud para restablecer la contraseña de tu cuenta.", "Restablecer contraseña"),
    "pt": ("Acesse sua conta", "Use o botão abaixo para entrar na sua conta. O link expira em 15 minutos.", "Entrar na minha conta"),
    "it": ("Sei stato invitato", "Marco ti ha invitato a unirti al team Vendite.", "Accetta l'invito"),
    "nl": ("Wachtwoord opnieuw instellen", "Je hebt gevraagd om je wachtwoord opnieuw in te stellen.", "Wachtwoord herstellen"),
    "zh": ("请验证您的邮箱", "感谢注册！请点击下方按钮验证您的邮箱地址。", "验证邮箱"),
    "ja": ("メールアドレスの確認", "以下のボタンをクリックして、メールアドレスの確認を完了してください。", "メールアドレスを確認する"),
    "ko": ("비밀번호 재설정", "비밀번호 재설정을 요청하셨습니다. 아래 버튼을 눌러 새 비밀번호를 설정하세요.", "비밀번호 재설정"),
    "ru": ("Подтвердите адрес электронной почты", "Чтобы завершить регистрацию, подтвердите адрес электронной почты.", "Подтвердить адрес"),
}

L10N_RECEIPT = {
    "de": ("Ihre Bestellung Nr. {o} ist eingegangen", "Vielen Dank für Ihre Bestellung!\n\nBestellnummer: {o}\nDatum: 01.12.2026\nGesamtbetrag: 89,90 €\nKundennummer: 558120\n"),
    "fr": ("Confirmation de votre commande n° {o}", "Merci pour votre commande !\n\nCommande n° {o} du 1 décembre 2026\nMontant total : 129,00 €\nNuméro client : 774301\n"),
    "ja": ("ご注文ありがとうございます（注文番号 {o}）", "ご注文を承りました。\n\n注文番号：{o}\nご注文日：2026年12月1日\nお支払い金額：4,980円\n"),
    "ru": ("Ваш заказ № {o} оформлен", "Спасибо за заказ!\n\nНомер заказа: {o}\nДата: 01.12.2026\nСумма: 2 490 ₽\n"),
    "es": ("Confirmación de tu pedido {o}", "¡Gracias por tu compra!\n\nPedido n.º {o}\nFecha: 1 de diciembre de 2026\nTotal: 59,95 €\n"),
}


def l10n_code(lang, i, fmt):
    b, dom = brand()
    code = code6()
    subj, intro, outro = L10N_CODE[lang]
    intro = intro.format(b=b)
    text = "%s\n\n%s\n\n%s\n" % (intro, code, outro) + footer_text(b, dom, lang)
    body = "".join("<p>%s</p>" % H.escape(l) for l in intro.split("\n") if l.strip()) + big_code(code) + "<p>%s</p>" % H.escape(outro)
    html = wrap_html(b, body, footer_html(b, dom, lang))
    emit("%s-code-%d" % (lang, i), subj, code, "-", text if fmt != "html" else None, html if fmt != "text" else None, "sign-up", lang)


def l10n_link(lang, i):
    b, dom = brand()
    link = "https://%s/%s/a/%s" % (dom, lang, token())
    subj, intro, label = L10N_LINK[lang]
    body = "<p>%s</p>%s" % (H.escape(intro), button(link, label))
    emit("%s-link-%d" % (lang, i), subj, "-", link, None, wrap_html(b, body, footer_html(b, dom, lang)), "link", lang)


def l10n_receipt(lang, i):
    b, dom = brand()
    o = str(rnd.randrange(1000000, 9999999))
    subj, text = L10N_RECEIPT[lang]
    emit("%s-receipt-%d" % (lang, i), subj.format(o=o), "-", "-", text.format(o=o) + footer_text(b, dom, lang), None, "receipt", lang)


def main():
    n = 0
    for i in range(6):
        signup_code(i, ["text", "html", "both"][i % 3], grouped=[None, "space", "dash"][i % 3], rich=i % 2 == 0)
    for i in range(4):
        signup_code_and_button(i)
    for i in range(3):
        signup_cells(i)
    for i in range(3):
        signin_subject_only(i)
    for i in range(4):
        signin_prefixed(i)
    for i in range(4):
        signin_letters(i, hyphen=i % 2 == 0)
    for i in range(3):
        twofa_grouped8(i)
    for i in range(5):
        twofa_sms_style(i)
    for i in range(6):
        twofa_new_vs_expired(i)
    for i in range(3):
        purchase_confirm_code(i)
    for i in range(5):
        magic_button(i, tracked=i % 2 == 1)
    for i in range(3):
        magic_text(i)
    for i in range(3):
        magic_and_code(i)
    for i in range(5):
        reset_button(i)
    for i in range(2):
        reset_text(i)
    for i in range(2):
        reset_code(i)
    for i in range(5):
        invite(i)
    for i in range(4):
        email_change(i)
    for i in range(4):
        welcome(i)
    for i in range(4):
        receipt(i)
    for i in range(3):
        newsletter(i)
    for i in range(3):
        signin_alert(i)
    for i in range(2):
        shipping(i)
    for i in range(2):
        password_changed(i)
    for lang in L10N_CODE:
        l10n_code(lang, 0, "both")
        l10n_code(lang, 1, ["html", "text"][len(lang) % 2])
        l10n_link(lang, 0)
    for lang in L10N_RECEIPT:
        l10n_receipt(lang, 0)

    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.startswith("g") and f.endswith(".mail"):
            os.remove(os.path.join(OUT, f))
    for k, (name, subject, otp, link, text, html, kind, lang) in enumerate(files):
        with open(os.path.join(OUT, "g%03d-%s.mail" % (k + 1, name)), "w", encoding="utf-8") as fh:
            fh.write("subject: %s\notp: %s\naction_link: %s\nkind: %s\nlang: %s\n" % (subject, otp, link, kind, lang))
            if text is not None:
                fh.write("--- text\n%s\n" % text.rstrip("\n"))
            if html is not None:
                fh.write("--- html\n%s\n" % html.rstrip("\n"))
    print(len(files), "mails written to", OUT)


if __name__ == "__main__":
    main()
