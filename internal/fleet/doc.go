// Package fleet holds the tests of several planes sharing one PostgreSQL
// (mail-plane serve --store postgres): real mail-plane, mail-writer and
// mail-gateway processes over a real PostgreSQL (internal/pgtest).
package fleet
