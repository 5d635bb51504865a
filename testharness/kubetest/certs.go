package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the cluster's key material, written as PEM files into a folder.
type pki struct {
	caCert, caKey         string // the CA that signs serving and client certificates
	serverCert, serverKey string // the API server's serving certificate
	adminCert, adminKey   string // the admin's client certificate (system:masters)
	saKey, saPub          string // the service-account token signing key
	caPEM, adminCertPEM   []byte
	adminKeyPEM           []byte
}

// newPKI generates a CA, a serving certificate for 127.0.0.1 and localhost,
// an admin client certificate and a service-account key pair in dir.
func newPKI(dir string) (*pki, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kubetest-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p := &pki{
		caCert: filepath.Join(dir, "ca.crt"), caKey: filepath.Join(dir, "ca.key"),
		serverCert: filepath.Join(dir, "apiserver.crt"), serverKey: filepath.Join(dir, "apiserver.key"),
		adminCert: filepath.Join(dir, "admin.crt"), adminKey: filepath.Join(dir, "admin.key"),
		saKey: filepath.Join(dir, "sa.key"), saPub: filepath.Join(dir, "sa.pub"),
	}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	if err := writeKey(p.caKey, caKey); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.caCert, p.caPEM, 0o644); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	server := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		// PodGateway: the API server's address WithServices.
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1"), net.ParseIP(PodGateway)},
		DNSNames:    []string{"localhost", host, "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	}
	if _, _, err := issue(server, ca, caKey, p.serverCert, p.serverKey); err != nil {
		return nil, err
	}
	admin := &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "kubetest-admin", Organization: []string{"system:masters"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if p.adminCertPEM, p.adminKeyPEM, err = issue(admin, ca, caKey, p.adminCert, p.adminKey); err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := writeKey(p.saKey, saKey); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return nil, err
	}
	return p, nil
}

// issue signs tmpl with the CA and writes the certificate and a new key.
func issue(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certFile, keyFile string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("kubetest: issue %s: %w", tmpl.Subject.CommonName, err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		return nil, nil, err
	}
	if err := writeKey(keyFile, key); err != nil {
		return nil, nil, err
	}
	keyPEM, err = os.ReadFile(keyFile)
	return certPEM, keyPEM, err
}

func writeKey(file string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

// nodeCerts are a kubelet's certificates, signed by the cluster's CA.
type nodeCerts struct {
	clientCert, clientKey string // system:node:<host> in group system:nodes
	serveCert, serveKey   string // the kubelet's serving certificate for host and 127.0.0.1
}

// issueNode signs a kubelet's client and serving certificates for host
// with the CA read back from p's files, and writes them into dir.
func (p *pki) issueNode(dir, host string) (*nodeCerts, error) {
	ca, caKey, err := p.loadCA()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	n := &nodeCerts{
		clientCert: filepath.Join(dir, "kubelet-client.crt"), clientKey: filepath.Join(dir, "kubelet-client.key"),
		serveCert: filepath.Join(dir, "kubelet.crt"), serveKey: filepath.Join(dir, "kubelet.key"),
	}
	client := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{CommonName: "system:node:" + host, Organization: []string{"system:nodes"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if _, _, err := issue(client, ca, caKey, n.clientCert, n.clientKey); err != nil {
		return nil, err
	}
	serve := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano() + 1),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{host, "localhost"},
	}
	if _, _, err := issue(serve, ca, caKey, n.serveCert, n.serveKey); err != nil {
		return nil, err
	}
	return n, nil
}

// loadCA reads the CA's certificate and key back from p's files.
func (p *pki) loadCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	blk, _ := pem.Decode(p.caPEM)
	if blk == nil {
		return nil, nil, fmt.Errorf("kubetest: %s holds no PEM certificate", p.caCert)
	}
	ca, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("kubetest: %s: %w", p.caCert, err)
	}
	b, err := os.ReadFile(p.caKey)
	if err != nil {
		return nil, nil, err
	}
	kblk, _ := pem.Decode(b)
	if kblk == nil {
		return nil, nil, fmt.Errorf("kubetest: %s holds no PEM key", p.caKey)
	}
	key, err := x509.ParseECPrivateKey(kblk.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("kubetest: %s: %w", p.caKey, err)
	}
	return ca, key, nil
}
