package main

import "reflect"

// emptyLists returns v with every nil slice reachable through its exported
// struct fields, slice elements and pointers replaced by an empty one, so
// that every list of every JSON output prints as [] and never as null.
// v itself is not changed (structs and pointees are copied). Byte slices
// (json.RawMessage: a raw null there is meant) and maps are left as they
// are.
func emptyLists(v any) any {
	if v == nil {
		return nil
	}
	rv := reflect.ValueOf(v)
	out := reflect.New(rv.Type()).Elem()
	out.Set(rv)
	fillLists(out, 0)
	return out.Interface()
}

// maxListDepth bounds the walk (outputs are shallow; a cycle would not be).
const maxListDepth = 16

func fillLists(v reflect.Value, depth int) {
	if depth > maxListDepth {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				fillLists(f, depth+1)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		if v.IsNil() {
			if v.CanSet() {
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			}
			return
		}
		// Copy before filling: the slice's array may be the engine's.
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(c, v)
		for i := range c.Len() {
			fillLists(c.Index(i), depth+1)
		}
		if v.CanSet() {
			v.Set(c)
		}
	case reflect.Pointer:
		if v.IsNil() || v.Elem().Kind() != reflect.Struct || !v.CanSet() {
			return
		}
		p := reflect.New(v.Elem().Type())
		p.Elem().Set(v.Elem())
		fillLists(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Interface:
		if v.IsNil() || !v.CanSet() {
			return
		}
		e := v.Elem()
		c := reflect.New(e.Type()).Elem()
		c.Set(e)
		fillLists(c, depth+1)
		v.Set(c)
	}
}
