package main

import "testing"

func TestOptionsFromEnv(t *testing.T) {
	env := map[string]string{"STRATA_BOOTSTRAP": " a:1, b:2 ,", "STRATA_REGISTRY_URL": "http://r", "STRATA_DLQ_GROUP": "g"}
	o, err := optionsFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Seeds) != 2 || o.Seeds[0] != "a:1" || o.Seeds[1] != "b:2" || o.RegistryURL != "http://r" || o.Group != "g" {
		t.Fatalf("options %+v", o)
	}
	if _, err := optionsFromEnv(func(string) string { return "" }); err == nil {
		t.Fatal("no STRATA_BOOTSTRAP: want an error")
	}
}
