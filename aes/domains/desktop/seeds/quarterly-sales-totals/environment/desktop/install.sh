#!/bin/sh
# Build-time setup of the desktop kit (the base recipe runs it once, as root): the agent user, the
# kit's commands on PATH, the X socket directory, /run/desktop for the session, and LibreOffice's
# profile template (created here from the fixed settings in registrymodifications.xcu, copied to
# /run/desktop/profile at each start, so every session starts from the same profile).
set -eu
useradd --create-home --shell /bin/bash agent
mkdir -p /app && chown agent:agent /app
for f in desktop-start desktop-wait desktop-settle desktop-save desktop-shot desktop-text; do ln -sf /opt/desktop/$f /usr/local/bin/$f; done
mkdir -p /tmp/.X11-unix && chmod 1777 /tmp/.X11-unix
mkdir -p /run/desktop && chown agent:agent /run/desktop
mkdir -p /opt/desktop/profile/user
cp /opt/desktop/registrymodifications.xcu /opt/desktop/profile/user/
HOME=/opt/desktop/build-home soffice -env:UserInstallation=file:///opt/desktop/profile --headless --terminate_after_init
rm -rf /opt/desktop/build-home /opt/desktop/profile/user/extensions/tmp
chmod -R a+rX /opt/desktop
fc-cache -s
