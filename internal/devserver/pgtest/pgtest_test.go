package pgtest

import (
	"database/sql"
	"slices"
	"testing"
)

func TestServerAcceptsPasswordLogins(t *testing.T) {
	s := Start(t)
	role := s.NewRole(t, false)
	name := s.NewDatabase(t, role)
	db, err := sql.Open("postgres", s.URL(role, name))
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	var who string
	if err := db.QueryRow("SELECT current_user").Scan(&who); err != nil {
		t.Fatal(err)
	}
	if who != role.Name {
		t.Errorf("logged in as %q; want %q", who, role.Name)
	}
	wrong := Role{Name: role.Name, Password: "wrong"}
	bad, err := sql.Open("postgres", s.URL(wrong, name))
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, bad)
	if err := bad.Ping(); err == nil {
		t.Error("a wrong password was accepted")
	}
	if dbs := s.Databases(t); !slices.Contains(dbs, name) {
		t.Errorf("databases = %v; want %s among them", dbs, name)
	}
}
