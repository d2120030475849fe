# The e2e test's probe (build/e2e/probe): a static binary in an otherwise
# empty image. The test runs it on each zone's network, or as a zone's user
# with that zone's volumes, with the same hardening as the zones.
FROM scratch
ADD dirs.tar /
COPY e2e-probe /e2e-probe
LABEL org.websitebench.mailplane.image="e2e-probe"
USER 65534:65534
ENTRYPOINT ["/e2e-probe"]
